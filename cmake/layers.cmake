# layers.cmake: the folders' libraries, bottom to top, and what each may use.
#
# One entry per library: "LIBRARY|FOLDER[,FOLDER...]|LIBRARY[,LIBRARY...]",
# the libraries it links (and so whose folders it may include from), all of
# them listed above it. An entry whose library is "-" builds nothing: its
# folders' files (programs, the CUDA backend, kernel emulation) are only held
# to the same rule. CMakeLists.txt builds the libraries; check_layers.cmake
# fails the build when a file includes a header from a folder its library
# does not reach, directly or through the libraries it links.
#
#   kernels/      the op table and its CPU backend: nothing of core/
#   core/util     errors, memory, files, strings, statistics, YAML helpers
#   core/results  the results schema (every file, header, column and trial
#                 kind name), the run directory, run.json's end
#   core/prof     timers, the timeline, CUPTI, the machine fingerprint
#   core/comm     the communicator: control and data planes, process groups
#   core/model    the ViT, Adam, mixed precision, checkpoints, DDP buckets
#   core/data     the ERA5 loader, .npy files, the double buffer
#   core/config   config keys, YAML configs, benchy's config, the flag parser
#   core/run      a run: setup, the training step, staging, the train loop
#   analysis/     results to answers, and the scaling model (scaling/)
#   bench/        the harness: benchy's trials, sweeps, commbench, datagen
set(VB_LAYERS
  "vitbench_kernels|kernels,kernels/cpu|"
  "-|kernels/cuda,kernels/cuda/emu|vitbench_kernels"
  "vitbench_util|core/util|"
  "vitbench_results|core/results|vitbench_util"
  "vitbench_prof|core/prof|vitbench_results,vitbench_kernels"
  "vitbench_comm|core/comm|vitbench_prof"
  "vitbench_model|core/model|vitbench_comm"
  "vitbench_data|core/data|vitbench_prof"
  "vitbench_config|core/config|vitbench_results,vitbench_comm"
  "vitbench_run|core/run|vitbench_config,vitbench_data,vitbench_model"
  "vitbench_analysis|analysis,analysis/scaling|vitbench_config,vitbench_model"
  "vitbench_harness|bench,bench/sweep,bench/commbench|vitbench_analysis,vitbench_run"
  "-|bench/dev|vitbench_run"
)

# vb_layer_parse(ENTRY LIB DIRS DEPS): one entry's three fields as lists
function(vb_layer_parse entry out_lib out_dirs out_deps)
  if(NOT entry MATCHES "^([^|]+)\\|([^|]+)\\|([^|]*)$")
    message(FATAL_ERROR "layers.cmake: malformed entry '${entry}' (LIBRARY|FOLDERS|LIBRARIES)")
  endif()
  string(REPLACE "," ";" dirs "${CMAKE_MATCH_2}")
  string(REPLACE "," ";" deps "${CMAKE_MATCH_3}")
  set(${out_lib} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  set(${out_dirs} "${dirs}" PARENT_SCOPE)
  set(${out_deps} "${deps}" PARENT_SCOPE)
endfunction()
