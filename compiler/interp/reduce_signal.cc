// Reference kernels for det, dft, stft, the window functions and mel_weight_matrix. Plain
// O(n^2) transforms in double: no FFT, so nothing to get subtly wrong.
#include <cmath>
#include <complex>

#include "absl/strings/str_cat.h"
#include "compiler/arith/check.h"
#include "compiler/interp/kernel_util.h"
#include "compiler/interp/reduce_internal.h"
#include "compiler/op/op_def.h"

namespace kiln::interp {
namespace {

using Complex = std::complex<double>;

// Argument i, which must hold exactly one element; `fallback` when it is omitted (none).
absl::StatusOr<double> ScalarArg(const ir::ExprNode& call, const std::vector<Value>& args, size_t i,
                                 double fallback) {
  if (i >= args.size() || args[i].is_none()) return fallback;
  KILN_ASSIGN_OR_RETURN(const NDArray* a, TensorArg(call, args, i));
  if (a->num_elements() != 1) {
    return KernelError(call, absl::StrCat("argument ", i, " must be a scalar"));
  }
  return a->GetDouble(0);
}

// Determinant by Gaussian elimination with partial pivoting.
double Determinant(std::vector<double> a, int64_t n) {
  double det = 1;
  for (int64_t col = 0; col < n; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < n; ++r) {
      if (std::abs(a[r * n + col]) > std::abs(a[pivot * n + col])) pivot = r;
    }
    if (a[pivot * n + col] == 0) return 0;
    if (pivot != col) {
      for (int64_t k = 0; k < n; ++k) std::swap(a[col * n + k], a[pivot * n + k]);
      det = -det;
    }
    det *= a[col * n + col];
    for (int64_t r = col + 1; r < n; ++r) {
      double factor = a[r * n + col] / a[col * n + col];
      for (int64_t k = col; k < n; ++k) a[r * n + k] -= factor * a[col * n + k];
    }
  }
  return det;
}

absl::StatusOr<Value> Det(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  size_t rank = x->shape.size();
  if (rank < 2 || x->shape[rank - 1] != x->shape[rank - 2]) {
    return KernelError(call, "input must be a stack of square matrices");
  }
  int64_t n = x->shape[rank - 1];
  NDArray out = NDArray::Zeros(x->dtype, Shape(x->shape.begin(), x->shape.end() - 2));
  for (int64_t m = 0; m < out.num_elements(); ++m) {
    std::vector<double> a(n * n);
    for (int64_t i = 0; i < n * n; ++i) a[i] = x->GetDouble(m * n * n + i);
    out.SetDouble(m, Determinant(std::move(a), n));
  }
  return Value(std::move(out));
}

// out[m] = sum_k in[k] e^(-+2 pi i m k / n) for m < bins; `in` holds n samples (zero padded).
std::vector<Complex> Transform(const std::vector<Complex>& in, int64_t bins, bool inverse) {
  int64_t n = in.size();
  std::vector<Complex> out(bins);
  double sign = inverse ? 1 : -1;
  for (int64_t m = 0; m < bins; ++m) {
    Complex s = 0;
    for (int64_t k = 0; k < n; ++k) {
      // Reduce m*k mod n first so that the angle stays small and exact.
      double angle = sign * 2 * M_PI * static_cast<double>((m * k) % n) / static_cast<double>(n);
      s += in[k] * Complex(std::cos(angle), std::sin(angle));
    }
    out[m] = inverse ? s / static_cast<double>(n) : s;
  }
  return out;
}

absl::StatusOr<Value> DFT(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  int64_t rank = x->shape.size();
  if (rank < 2) return KernelError(call, "input must have rank >= 2");
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        op::NormalizeAxis(call, op::GetIntAttr(call.attrs, "axis", 1), rank - 1));
  bool inverse = op::GetIntAttr(call.attrs, "inverse", 0) != 0;
  bool onesided = op::GetIntAttr(call.attrs, "onesided", 0) != 0;
  int64_t parts = x->shape.back(), n_in = x->shape[axis];
  KILN_ASSIGN_OR_RETURN(double length, ScalarArg(call, args, 1, n_in));
  int64_t n = static_cast<int64_t>(length);
  if (n <= 0) return KernelError(call, "dft_length must be positive");
  int64_t bins = onesided ? n / 2 + 1 : n;
  Shape out_shape = x->shape, outer = x->shape;
  out_shape[axis] = bins;
  out_shape.back() = 2;
  outer[axis] = 1;
  outer.pop_back();
  NDArray out = NDArray::Zeros(x->dtype, out_shape);
  Shape in_strides = Strides(x->shape), out_strides = Strides(out_shape);
  ForEachIndex(outer, [&](const Index& idx) {
    Index full = idx;
    full.push_back(0);
    int64_t in_base = Offset(full, in_strides), out_base = Offset(full, out_strides);
    std::vector<Complex> signal(n);
    for (int64_t k = 0; k < std::min(n, n_in); ++k) {
      int64_t at = in_base + k * in_strides[axis];
      signal[k] = Complex(x->GetDouble(at), parts == 2 ? x->GetDouble(at + 1) : 0.0);
    }
    std::vector<Complex> spectrum = Transform(signal, bins, inverse);
    for (int64_t m = 0; m < bins; ++m) {
      out.SetDouble(out_base + m * out_strides[axis], spectrum[m].real());
      out.SetDouble(out_base + m * out_strides[axis] + 1, spectrum[m].imag());
    }
  });
  return Value(std::move(out));
}

absl::StatusOr<Value> STFT(const ir::ExprNode& call, const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(const NDArray* x, TensorArg(call, args, 0));
  if (x->shape.size() != 3) return KernelError(call, "signal must be 3-D");
  int64_t batch = x->shape[0], length = x->shape[1], parts = x->shape[2];
  KILN_ASSIGN_OR_RETURN(double step_arg, ScalarArg(call, args, 1, 0));
  int64_t step = static_cast<int64_t>(step_arg);
  const NDArray* window = args[2].is_tensor() ? &args[2].tensor() : nullptr;
  KILN_ASSIGN_OR_RETURN(double frame_arg,
                        ScalarArg(call, args, 3, window ? window->num_elements() : -1));
  int64_t frame = static_cast<int64_t>(frame_arg);
  if (frame <= 0 || step <= 0 || frame > length) {
    return KernelError(call, "frame_length and frame_step must be positive and fit the signal");
  }
  if (window && window->num_elements() != frame) {
    return KernelError(call, "window length differs from frame_length");
  }
  bool onesided = op::GetIntAttr(call.attrs, "onesided", 1) != 0;
  int64_t frames = (length - frame) / step + 1, bins = onesided ? frame / 2 + 1 : frame;
  NDArray out = NDArray::Zeros(x->dtype, {batch, frames, bins, 2});
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      std::vector<Complex> signal(frame);
      for (int64_t k = 0; k < frame; ++k) {
        int64_t at = (b * length + f * step + k) * parts;
        double w = window ? window->GetDouble(k) : 1.0;
        signal[k] = w * Complex(x->GetDouble(at), parts == 2 ? x->GetDouble(at + 1) : 0.0);
      }
      std::vector<Complex> spectrum = Transform(signal, bins, false);
      for (int64_t m = 0; m < bins; ++m) {
        out.SetDouble(((b * frames + f) * bins + m) * 2, spectrum[m].real());
        out.SetDouble(((b * frames + f) * bins + m) * 2 + 1, spectrum[m].imag());
      }
    }
  }
  return Value(std::move(out));
}

absl::StatusOr<arith::DataType> DTypeAttr(const ir::ExprNode& call) {
  auto dtype = arith::DataType::Parse(op::GetStringAttr(call.attrs, "dtype", "f32"));
  if (!dtype.ok()) return KernelError(call, std::string(dtype.status().message()));
  return *dtype;
}

// Generalized cosine windows: sum_k a_k cos(2 pi k n / N) with alternating signs folded
// into the coefficients; N is the size when periodic, size - 1 when symmetric.
absl::StatusOr<Value> Window(const std::vector<double>& coeffs, const ir::ExprNode& call,
                             const std::vector<Value>& args) {
  KILN_ASSIGN_OR_RETURN(arith::DataType dtype, DTypeAttr(call));
  KILN_ASSIGN_OR_RETURN(double size_arg, ScalarArg(call, args, 0, -1));
  int64_t size = static_cast<int64_t>(size_arg);
  if (size < 0) return KernelError(call, "size must not be negative");
  bool periodic = op::GetIntAttr(call.attrs, "periodic", 1) != 0;
  double period = static_cast<double>(periodic ? size : size - 1);
  NDArray out = NDArray::Zeros(dtype, {size});
  for (int64_t n = 0; n < size; ++n) {
    double v = 0;
    for (size_t k = 0; k < coeffs.size(); ++k) {
      v += coeffs[k] * std::cos(2 * M_PI * static_cast<double>(k * n) / period);
    }
    out.SetDouble(n, period == 0 ? 1.0 : v);
  }
  return Value(std::move(out));
}

// Triangular filters evenly spaced on the mel scale, computed the way the ONNX reference
// does (float32 mel edges, then double), so that bin boundaries fall identically.
absl::StatusOr<Value> MelWeightMatrix(const ir::ExprNode& call, const std::vector<Value>& args) {
  std::vector<double> a(5);
  for (size_t i = 0; i < 5; ++i) {
    KILN_ASSIGN_OR_RETURN(a[i], ScalarArg(call, args, i, -1));
  }
  KILN_ASSIGN_OR_RETURN(arith::DataType dtype, DTypeAttr(call));
  int64_t mel_bins = static_cast<int64_t>(a[0]), dft_length = static_cast<int64_t>(a[1]);
  int64_t rate = static_cast<int64_t>(a[2]);
  if (mel_bins <= 0 || dft_length <= 0 || rate <= 0) {
    return KernelError(call, "num_mel_bins, dft_length and sample_rate must be positive");
  }
  auto mel = [](float hz) { return 2595.0f * std::log10(1.0f + hz / 700.0f); };
  float low = mel(static_cast<float>(a[3]));
  float high = mel(static_cast<float>(a[4]));
  float step = (high - low) / static_cast<float>(mel_bins + 2);
  std::vector<int64_t> edges(mel_bins + 2);
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    double hz = 700 * (std::pow(10.0, (i * static_cast<double>(step) + low) / 2595) - 1);
    edges[i] = static_cast<int64_t>(std::floor((dft_length + 1) * hz / rate));
  }
  int64_t spectrogram_bins = dft_length / 2 + 1;
  NDArray out = NDArray::Zeros(dtype, {spectrogram_bins, mel_bins});
  auto set = [&](int64_t j, int64_t i, double v) -> absl::Status {
    if (j < 0 || j >= spectrogram_bins) return KernelError(call, "mel band edge out of range");
    out.SetDouble(j * mel_bins + i, v);
    return absl::OkStatus();
  };
  for (int64_t i = 0; i < mel_bins; ++i) {
    int64_t left = edges[i], center = edges[i + 1], right = edges[i + 2];
    if (center == left) {
      KILN_RETURN_IF_ERROR(set(center, i, 1));
    } else {
      for (int64_t j = left; j <= center; ++j) {
        KILN_RETURN_IF_ERROR(set(j, i, double(j - left) / double(center - left)));
      }
    }
    for (int64_t j = center; j < right; ++j) {
      KILN_RETURN_IF_ERROR(set(j, i, double(right - j) / double(right - center)));
    }
  }
  return Value(std::move(out));
}

}  // namespace

void RegisterSignalKernels(KernelTable& table) {
  table["det"] = Det;
  table["dft"] = DFT;
  table["stft"] = STFT;
  auto window = [](std::vector<double> coeffs) {
    return [coeffs](const ir::ExprNode& call, const std::vector<Value>& args) {
      return Window(coeffs, call, args);
    };
  };
  table["hann_window"] = window({0.5, -0.5});
  table["hamming_window"] = window({25.0 / 46.0, -21.0 / 46.0});
  table["blackman_window"] = window({0.42, -0.5, 0.08});
  table["mel_weight_matrix"] = MelWeightMatrix;
}

}  // namespace kiln::interp
