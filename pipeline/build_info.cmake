# pipeline/build_info.cmake: writes build_info.h from build_info.h.in; run by the custom target
# kascade_build_info_header at every build (top-level CMakeLists.txt), so the commit is the one being built.
#   cmake -DSOURCE_DIR=... -DINPUT=build_info.h.in -DOUTPUT=build_info.h -DPROJECT_VERSION=... -DCMAKE_BUILD_TYPE=...
#         -P build_info.cmake
# KASCADE_GIT_COMMIT is the abbreviated HEAD commit, with "-dirty" when tracked files differ from it (as
# `git describe --dirty`: untracked files do not count), or "unknown" outside a git checkout.

execute_process(COMMAND git rev-parse --short=12 HEAD
                WORKING_DIRECTORY ${SOURCE_DIR}
                RESULT_VARIABLE rev_parse_result
                OUTPUT_VARIABLE KASCADE_GIT_COMMIT
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT rev_parse_result EQUAL 0 OR NOT KASCADE_GIT_COMMIT)
  set(KASCADE_GIT_COMMIT "unknown")
else()
  # --no-optional-locks: a build must not take the index lock of a checkout someone is committing in.
  execute_process(COMMAND git --no-optional-locks status --porcelain --untracked-files=no
                  WORKING_DIRECTORY ${SOURCE_DIR}
                  RESULT_VARIABLE status_result
                  OUTPUT_VARIABLE changes
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT status_result EQUAL 0 OR changes)
    string(APPEND KASCADE_GIT_COMMIT "-dirty")
  endif()
endif()

# configure_file leaves OUTPUT untouched when its text is unchanged: nothing that includes it is recompiled.
configure_file(${INPUT} ${OUTPUT} @ONLY)
