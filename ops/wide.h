// Accumulator types of the CPU references: wider than what the kernels use, so a
// reference is a better answer, not the same rounding.
#pragma once
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <type_traits>

namespace bankops {

template <class T> struct Wide { using type = int64_t; };  // integers and bool
template <> struct Wide<c10::Half> { using type = double; };
template <> struct Wide<c10::BFloat16> { using type = double; };
template <> struct Wide<float> { using type = double; };
template <> struct Wide<double> { using type = long double; };
template <class T> using wide_t = typename Wide<T>::type;

template <class T>
constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>;

}  // namespace bankops
