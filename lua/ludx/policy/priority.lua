-- Priority classes: names for weights in a shared limiter (a link). With
-- the default classes a "high" stream gets 4 times what a "normal" one
-- does, and 16 times a "low" one, while they all have data to send.
local M = {}

M.CLASSES = { high = 16, normal = 4, low = 1 }
M.DEFAULT = "normal"

--- A weight from a class name or a number >= 1; nil when it is neither.
function M.weight(w)
  if w == nil then w = M.DEFAULT end
  if type(w) == "string" then return M.CLASSES[w] end
  if type(w) == "number" and w >= 1 and w <= 1000000 and w == w then return math.floor(w) end
  return nil
end

return M
