// Zeroing the padding of a batch's feature maps, so that no layer reads what it computed over
// another image's padding. Without it, a 3x3 convolution near an image's border sees the previous
// layer's response to the zero padding (biases, batch-norm shifts, spread-out activations), and
// that response depends on how much the image is padded: the same image alone and in a larger
// batch would give different features. With it, every feature map holds exactly zero outside each
// image's valid region (the true size divided by the map's stride, rounded up, as a convolution
// chain on the image alone gives), whatever the padding.
//
// A map [N, C, H, W] of a batch padded to Hp x Wp has stride Hp / H; image i's valid region is
// ceil(h_i * H / Hp) x ceil(w_i * W / Wp). Maps whose valid regions all fill the tensor need no
// mask (no work: a batch of equally sized images padded by less than a stride).
//
// On a GPU nothing here reads the device: the sizes go there once per batch, without blocking,
// and each map size's mask is computed there.
//
// Thread-safety: not thread-safe (masks are built lazily and cached); one per forward call.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <utility>

namespace mrcnn::model {

class PaddingMasks {
 public:
  // image_sizes: int64 [N, 2] true (h, w) (read on the CPU: pass the host copy); padded_h/w: the batch's
  // padded size; masks are made on `device`.
  PaddingMasks(const at::Tensor& image_sizes, int64_t padded_h, int64_t padded_w,
               c10::Device device);
  // Masks of every map size, computed from sizes already on the device (int64 [N, 2]) and never
  // read on the host: for work captured once and replayed with other sizes (a CUDA graph). A map
  // with nothing padded gets a mask of ones, which changes no value.
  static PaddingMasks from_device_sizes(const at::Tensor& device_sizes, int64_t padded_h, int64_t padded_w);

  // Zeroes the padding of x in place, for a map of the batch ([N, C, H, W] with H dividing
  // padded_h): one masked fill in x's own dtype and layout (its backward zeroes the gradient
  // there, the same way), where a multiply by a float32 mask would mix dtypes and turn a negative
  // value into -0. Leaves x untouched when nothing of it is padding. In place is safe for
  // autograd where x is an output no backward formula keeps (a convolution's or a sum's, before
  // the ReLU).
  void apply_(const at::Tensor& x);
  // The same out of place (for a tensor an autograd node keeps); x itself when nothing is padding.
  at::Tensor applied(const at::Tensor& x);

  // The bool [N, 1, H, W] map of maps of size H x W, true on padding; undefined when nothing is
  // padding. What apply_ fills.
  const at::Tensor& padding(int64_t h, int64_t w);
  // The float [N, 1, H, W] mask (1 inside each image, 0 on padding), undefined when nothing is
  // padding: padding(h, w) as a multiplier, for tests and readers.
  at::Tensor mask(int64_t h, int64_t w);

 private:
  const at::Tensor& device_sizes();  // sizes_ on device_, copied on first use

  at::Tensor sizes_;         // int64 [N, 2] CPU; undefined: from_device_sizes (mask every map)
  at::Tensor device_sizes_;  // int64 [N, 2] on device_ (sizes_ itself on the CPU)
  int64_t padded_h_, padded_w_;
  c10::Device device_;
  std::map<std::pair<int64_t, int64_t>, at::Tensor> cache_;
};

}  // namespace mrcnn::model
