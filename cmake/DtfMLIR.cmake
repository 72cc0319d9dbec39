# Finds MLIR/LLVM 19 for the compiler side and defines `dtf_mlir`, an interface
# target that carries their headers (as SYSTEM, so their warnings stay out) and
# the shared libraries libMLIR and libLLVM.
if(NOT MLIR_DIR AND EXISTS /usr/lib/llvm-19/lib/cmake/mlir)
  set(MLIR_DIR /usr/lib/llvm-19/lib/cmake/mlir)
endif()
find_package(MLIR REQUIRED CONFIG)
if(NOT LLVM_VERSION_MAJOR EQUAL 19)
  message(FATAL_ERROR "dtf needs MLIR 19, found LLVM ${LLVM_PACKAGE_VERSION} at ${MLIR_DIR}")
endif()
message(STATUS "dtf: MLIR from ${MLIR_DIR}")

list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
include(TableGen)
include(AddLLVM)
include(AddMLIR)

# mlir_tablegen reads the directory's include path to resolve `include` in .td.
include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
include_directories(${PROJECT_SOURCE_DIR})

add_library(dtf_mlir INTERFACE)
target_include_directories(dtf_mlir SYSTEM INTERFACE
  ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
# The build tree holds the code mlir-tblgen generates: SYSTEM too, since its
# unused parameters are tblgen's business, not ours.
target_include_directories(dtf_mlir SYSTEM INTERFACE ${PROJECT_BINARY_DIR})
target_include_directories(dtf_mlir INTERFACE ${PROJECT_SOURCE_DIR})
separate_arguments(DTF_LLVM_DEFINITIONS NATIVE_COMMAND "${LLVM_DEFINITIONS}")
target_compile_options(dtf_mlir INTERFACE ${DTF_LLVM_DEFINITIONS})
target_link_libraries(dtf_mlir INTERFACE MLIR LLVM)
if(NOT LLVM_ENABLE_RTTI)
  target_compile_options(dtf_mlir INTERFACE -fno-rtti)
endif()
