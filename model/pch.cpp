// Owner of the shared LibTorch precompiled header; contains no code of its own.
#include "model/pch.h"
