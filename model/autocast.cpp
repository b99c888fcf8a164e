#include "model/autocast.h"

#include <ATen/autocast_mode.h>

namespace mrcnn::model {

AutocastGuard::AutocastGuard(Precision precision, c10::DeviceType device_type)
    : enabled_(precision != Precision::kFloat32),
      dtype_(precision == Precision::kFloat16 ? c10::ScalarType::Half : c10::ScalarType::BFloat16),
      device_type_(device_type) {
  if (!enabled_) return;
  previous_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  at::autocast::set_autocast_dtype(device_type_, dtype_);
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
}

}  // namespace mrcnn::model
