# Writes a C++ source holding the spec configs as string literals: spec::builtin_configs()
# (config.h). spec/CMakeLists.txt runs it at build time whenever a config changes:
#   cmake -DOUTPUT=<file.cpp> -DINPUTS=<a.json|b.json|...> -P embed_configs.cmake
string(REPLACE "|" ";" inputs "${INPUTS}")
set(delim "neuronsim_spec")  # of the raw string literals; no file may contain )neuronsim_spec"
set(entries "")
foreach(path IN LISTS inputs)
  get_filename_component(name "${path}" NAME)
  file(READ "${path}" text)
  string(FIND "${text}" ")${delim}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${path} contains )${delim}\", which would end its string literal")
  endif()
  string(APPEND entries "      {\"${name}\", R\"${delim}(${text})${delim}\"},\n")
endforeach()
file(WRITE "${OUTPUT}" "// The spec configs built into the library, written from spec/configs/*.json by
// spec/cmake/embed_configs.cmake at build time. Do not edit.
#include \"neuronsim/spec/config.h\"

namespace neuronsim::spec {

const std::map<std::string, std::string_view>& builtin_configs() {
  static const std::map<std::string, std::string_view> files = {
${entries}  };
  return files;
}

}  // namespace neuronsim::spec
")
