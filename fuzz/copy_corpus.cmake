# copy_corpus.cmake — the ctest fixture of fuzz/CMakeLists.txt: replaces the build tree's copies
# of the seed corpora and regression inputs with fresh ones of fuzz/corpus/<name> and
# fuzz/regression/<name> (either may be absent: an empty folder then), so each ctest run starts
# from the checked-in inputs and never writes into the sources; makes the artifacts folders too.
#   cmake -DSRC=<source>/fuzz -DDST=<build>/fuzz -DNAMES="parse;wire;..." -P copy_corpus.cmake
foreach(kind corpus regression)
  file(REMOVE_RECURSE ${DST}/${kind})
endforeach()
foreach(n ${NAMES})
  foreach(kind corpus regression)
    file(MAKE_DIRECTORY ${DST}/${kind}/${n})
    if(IS_DIRECTORY ${SRC}/${kind}/${n})
      file(COPY ${SRC}/${kind}/${n}/ DESTINATION ${DST}/${kind}/${n})
    endif()
  endforeach()
  file(MAKE_DIRECTORY ${DST}/artifacts/${n})
endforeach()
