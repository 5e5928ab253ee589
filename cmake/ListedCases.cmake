# ctest cases listed by the test program itself: `prog --list` prints one
# case name a line and `prog NAME` runs that case. Adding a case is one edit
# (the program's case table); no name is repeated in CMake.
#
#   include(${PROJECT_SOURCE_DIR}/cmake/ListedCases.cmake)
#   ludx_listed_cases(TARGET PREFIX [TIMEOUT seconds] [ARGS arg...])
#
# No TIMEOUT: ctest's default. ARGS go before the case name (`prog ARGS NAME`;
# generator expressions allowed). A listed line "NAME serial" makes the case
# RUN_SERIAL (it checks timing and must run alone).
#
# After each build of TARGET the list is read and written as add_test lines
# (PREFIX.NAME) to a file ctest includes; before the first build a single
# failing placeholder test says the program is not built yet.
# The same file runs as a script (cmake -P) to write that list.

if (CMAKE_SCRIPT_MODE_FILE)
  execute_process(COMMAND ${EXE} --list OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if (NOT rc EQUAL 0)
    message(FATAL_ERROR "${EXE} --list failed (${rc})")
  endif ()
  string(REPLACE "\n" ";" names "${out}")
  set(text "")
  set(args "")
  if (ARGS)
    string(REPLACE "|" ";" arg_list "${ARGS}")
    foreach (a ${arg_list})
      string(APPEND args " [=[${a}]=]")
    endforeach ()
  endif ()
  foreach (line ${names})
    if (line STREQUAL "")
      continue()
    endif ()
    set(serial FALSE)
    if (line MATCHES "^([^ ]+) serial$")
      set(n ${CMAKE_MATCH_1})
      set(serial TRUE)
    else ()
      set(n ${line})
    endif ()
    string(APPEND text "add_test([=[${PREFIX}.${n}]=] [=[${EXE}]=]${args} [=[${n}]=])\n")
    if (TIMEOUT)
      string(APPEND text "set_tests_properties([=[${PREFIX}.${n}]=] PROPERTIES TIMEOUT ${TIMEOUT})\n")
    endif ()
    if (serial)
      string(APPEND text "set_tests_properties([=[${PREFIX}.${n}]=] PROPERTIES RUN_SERIAL TRUE)\n")
    endif ()
  endforeach ()
  file(WRITE ${OUT} "${text}")
  return()
endif ()

function(ludx_listed_cases target prefix)
  cmake_parse_arguments(L "" "TIMEOUT" "ARGS" ${ARGN})
  set(timeout "")
  if (L_TIMEOUT)
    set(timeout -DTIMEOUT=${L_TIMEOUT})
  endif ()
  set(args "")
  if (L_ARGS)
    # one -D value: the list joined with | (split again by the script)
    string(REPLACE ";" "|" joined "${L_ARGS}")
    set(args -DARGS=${joined})
  endif ()
  set(list_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_cases.cmake)
  set(include_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_include.cmake)
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:${target}> -DPREFIX=${prefix} ${timeout} ${args} -DOUT=${list_file}
            -P ${CMAKE_CURRENT_FUNCTION_LIST_FILE}
    VERBATIM)
  file(WRITE ${include_file}
    "if (EXISTS [=[${list_file}]=])\n"
    "  include([=[${list_file}]=])\n"
    "else ()\n"
    "  add_test([=[${prefix}.NOT_BUILT]=] [=[${prefix}.NOT_BUILT]=])\n"
    "endif ()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()
