#include "cli/commands.h"

namespace mambamt::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> list = {
      sweep_command(),
      prepare_command(),
      status_command(),
      collect_command(),
      compare_command(),
      plan_command(),
      config_check_command(),
      config_doc_command(),
      store_show_command(),
      store_seal_command(),
      train_command(),
      eval_command(),
      translate_command(),
      explain_command(),
      bench_command(),
  };
  return list;
}

}  // namespace mambamt::cli
