// cli/main.cpp - placeholder entry until the commands land.
#include <cstdio>
int main() { return 0; }
