# Runs rdmalab-bench and rdmalab-kv with --describe and writes OUT from TEMPLATE: the model's
# copy of every parameter, mode and system the programs declare (model/programs.h), taken
# from the binaries of this build so that it cannot drift from them.
# usage: cmake -DBENCH=PATH -DKV=PATH -DTEMPLATE=PATH -DOUT=PATH -P describe_programs.cmake
foreach(program IN ITEMS BENCH KV)
  execute_process(COMMAND ${${program}} --describe OUTPUT_VARIABLE ${program}_DESCRIPTION
                  ERROR_VARIABLE error RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${${program}} --describe exited ${status}: ${error}")
  endif()
endforeach()
configure_file(${TEMPLATE} ${OUT} @ONLY)
