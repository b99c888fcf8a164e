#include "benchmark/train/step_clock.h"

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <optional>

#include "logging/console.h"

namespace mrcnn::train {

struct StepClock::Mark {
  std::chrono::steady_clock::time_point host;  // the CPU
  std::optional<c10::Event> event;             // other devices
};

std::shared_ptr<StepClock::Mark> StepClock::mark(const at::Device& device) {
  auto m = std::make_shared<Mark>();
  if (device.is_cpu()) {
    m->host = std::chrono::steady_clock::now();
    return m;
  }
  if (untimed_) return nullptr;
  try {
    const c10::impl::VirtualGuardImpl guard(device.type());
    m->event.emplace(device.type(), c10::EventFlag::BACKEND_DEFAULT);
    m->event->record(guard.getStream(device));
    return m;
  } catch (const std::exception& e) {
    untimed_ = true;
    logging::warn(std::string("step times: the device ") + device.str() + " does not time events (" + e.what() +
                  "): ranks' own step times are not reported");
    return nullptr;
  }
}

double StepClock::seconds(const std::shared_ptr<Mark>& from, const std::shared_ptr<Mark>& to) {
  if (!from || !to) return -1;
  if (!from->event) return std::chrono::duration<double>(to->host - from->host).count();
  try {
    to->event->synchronize();
    return from->event->elapsedTime(*to->event) / 1000.0;  // milliseconds
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace mrcnn::train
