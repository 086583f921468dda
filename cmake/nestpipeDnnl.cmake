# oneDNN (Debian libdnnl-dev, which ships no pkg-config file) and the OpenMP runtime it
# runs on, as one imported target nestpipe_DNNL. Used by nestpipe's own build and by the
# installed nestpipeConfig.cmake, so both link libnestpipe.a the same way.
if(NOT TARGET nestpipe_DNNL)
  find_path(nestpipe_DNNL_INCLUDE oneapi/dnnl/dnnl.h)
  find_library(nestpipe_DNNL_LIBRARY dnnl)
  find_package(OpenMP QUIET COMPONENTS C)
  if(nestpipe_DNNL_INCLUDE AND nestpipe_DNNL_LIBRARY AND OpenMP_C_FOUND)
    add_library(nestpipe_DNNL INTERFACE IMPORTED)
    set_target_properties(nestpipe_DNNL PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${nestpipe_DNNL_INCLUDE}"
      INTERFACE_LINK_LIBRARIES "${nestpipe_DNNL_LIBRARY};${OpenMP_C_LIBRARIES}")
  endif()
endif()
