# cassini_protobuf_c(<target> <file.proto>...)
#
# Generates protobuf-c sources for the given .proto files (paths relative to
# the calling CMakeLists.txt) into the build tree and adds them to <target>.
# The generated headers are included as "<module>/<name>.pb-c.h".
function(cassini_protobuf_c target)
  file(RELATIVE_PATH module_dir ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  set(out_root ${PROJECT_BINARY_DIR}/proto)
  foreach(proto ${ARGN})
    get_filename_component(name ${proto} NAME_WE)
    set(src ${out_root}/${module_dir}/${name}.pb-c.c)
    set(hdr ${out_root}/${module_dir}/${name}.pb-c.h)
    add_custom_command(
      OUTPUT ${src} ${hdr}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${out_root}
      COMMAND ${PROTOC_C} --proto_path=${PROJECT_SOURCE_DIR}
              --c_out=${out_root} ${module_dir}/${proto}
      DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${proto}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
      COMMENT "protoc-c ${module_dir}/${proto}")
    target_sources(${target} PRIVATE ${src})
    # Generated code is not ours to warn about.
    set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
                                "-Wno-missing-prototypes;-Wno-unused-parameter")
  endforeach()
  target_include_directories(${target} PUBLIC ${out_root})
  target_link_libraries(${target} PUBLIC PkgConfig::PROTOBUF_C)
endfunction()
