-- What a fetcher spends to check a hostile manifest: encodes manifests a
-- malicious share server could send and measures the Lua heap growth (GC
-- stopped: everything allocated, garbage included), what the decoded
-- manifest keeps, and the time of ludx.share.manifest.decode on each.
--
--   build/ludx tools/attack/share_manifest_memory.lua
local ludx = require "ludx"
local manifest = require "ludx.share.manifest"
local compact = require "ludx.compact"

-- distinct hashes, as a real manifest has (equal strings would be interned once)
local function encode(files, chunk_size)
  local w = compact.writer()
  w:uint(1):string("m"):uint8(2):uint(chunk_size):uint(#files)
  local n = 0
  for _, f in ipairs(files) do
    n = n + 1
    w:string(f.path):uint(f.size):fixed64(("%064d"):format(n))
    for _ = 1, math.ceil(f.size / chunk_size) do
      n = n + 1
      w:fixed32(("%032d"):format(n))
    end
  end
  return w:finish()
end

local function measure(label, s)
  collectgarbage()
  collectgarbage()
  collectgarbage("stop")
  local before = collectgarbage("count")
  local t0 = ludx.now()
  local m, why = manifest.decode(s) -- luacheck: ignore 231 (m is kept while measuring)
  local ms = ludx.now() - t0
  local grew = (collectgarbage("count") - before) / 1024
  collectgarbage("restart")
  collectgarbage()
  local kept = (collectgarbage("count") - before) / 1024
  m = nil
  print(string.format("%-40s %6.2f MB manifest -> %7.1f MB allocated, %6.1f MB kept, %5d ms, %s", label, #s / 1048576, grew, kept, ms,
    why and ("refused: " .. why) or "accepted"))
end

-- 1. ~1 MB: 250 paths of 2,047 one-byte components, each a distinct first name
do
  local files = {}
  for i = 1, 250 do
    files[i] = { path = string.format("%c%c", 97 + i % 26, 97 + math.floor(i / 26) % 26) .. string.rep("/a", 2046), size = 0 }
  end
  measure("deep paths (250 x 2047 components)", encode(files, 16384))
end

-- 2. the same bytes in paths of 128 components (the most a fetcher takes)
do
  local files = {}
  for i = 1, 2000 do
    files[i] = { path = string.format("d%05d", i) .. string.rep("/abc", 127), size = 0 }
  end
  measure("paths at the depth cap (2000 x 128)", encode(files, 16384))
end

-- 3. many small files up to the file cap
do
  local files = {}
  for i = 1, tonumber(os.getenv("FILES") or "262144") do files[i] = { path = "dir" .. (i % 97) .. "/f" .. i, size = 1 } end
  measure("many files (" .. #files .. ")", encode(files, 16384))
end

-- 4. few files, many chunk hashes (~30 MiB)
do
  local files = {}
  for i = 1, 4 do files[i] = { path = "big" .. i, size = 240000 * 16384 } end
  measure("chunk hashes (4 x 240000)", encode(files, 16384))
end
