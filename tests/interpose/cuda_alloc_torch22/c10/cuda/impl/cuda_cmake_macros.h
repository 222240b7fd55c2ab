// Stand-in (see ../../../README.md): missing from Debian's libtorch 1.13 headers.
#pragma once
