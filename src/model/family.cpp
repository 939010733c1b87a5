#include "model/family.h"

#include "core/error.h"

namespace seedling {

extern const Family kQwen3MoeFamily;
extern const Family kMixtralFamily;

namespace {
const Family* const kFamilies[] = {&kQwen3MoeFamily, &kMixtralFamily};
}

const Family& family_for(const std::string& model_type, const std::string& config_path) {
  std::string known;
  for (const Family* f : kFamilies) {
    if (model_type == f->model_type) return *f;
    known += (known.empty() ? "" : ", ") + std::string(f->model_type);
  }
  fail("{}: key 'model_type': '{}' is not supported (supported: {})", config_path, model_type, known);
}

}  // namespace seedling
