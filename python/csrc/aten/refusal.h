// Why a kernel refused a case, so that the fallback of the op can say which limit or
// dtype sent it to the CPU. kernel_call notes the refusal of each kernel it could not
// build; the fallback of the same op on the same thread reports it and clears it.
#pragma once

#include <optional>
#include <string>

namespace neuronsim::pytorch {

// `op` (an aten name) could not run its kernel: the kernel refused with `reason`.
void note_refusal(const std::string& op, const std::string& reason);
// The reason noted on this thread for `op` or one of its overloads ("aten::mm" for
// "aten::mm.out"), if any; clears what was noted either way.
std::optional<std::string> take_refusal(const std::string& op);

}  // namespace neuronsim::pytorch
