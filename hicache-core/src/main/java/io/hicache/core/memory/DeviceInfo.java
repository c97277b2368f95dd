package io.hicache.core.memory;

/**
 * Which device a runtime drives, and its memory. Immutable snapshot.
 *
 * @param runtime     the runtime's name ({@code emulated}, {@code cuda})
 * @param name        the device's name ({@code NVIDIA H200}, {@code emulated device in host memory})
 * @param ordinal     the device's index among the runtime's devices
 * @param totalBytes  the device's memory
 * @param freeBytes   memory not yet used, as the device reports it
 */
public record DeviceInfo(String runtime, String name, int ordinal, long totalBytes, long freeBytes) {}
