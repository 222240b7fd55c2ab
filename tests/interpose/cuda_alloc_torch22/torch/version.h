// Stand-in: libtorch 2.2 (see ../README.md).
#pragma once
#define TORCH_VERSION_MAJOR 2
#define TORCH_VERSION_MINOR 2
#define TORCH_VERSION_PATCH 0
#define TORCH_VERSION "2.2.0"
