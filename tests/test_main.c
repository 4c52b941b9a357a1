#define TEST_IMPLEMENTATION
#include "test.h"

int main(int argc, char **argv) { return test_main(argc, argv); }
