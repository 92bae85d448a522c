#include <iostream>
#include "mambamt_version.h"
int main(int argc, char** argv) { std::cout << "mambamt " << MAMBAMT_VERSION << "\n"; return 0; }
