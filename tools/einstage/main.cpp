// einstage: the command-line driver. Subcommands are added as the layers they drive land.
#include "ir/Error.h"

#include <fmt/format.h>

#include <string_view>

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) != "--help") {
    fmt::print(stderr, "einstage: unknown command '{}'; run 'einstage --help' for the list\n", argv[1]);
    return 2;
  }
  fmt::print("usage: einstage <command> [options]\n");
  return 0;
}
