/**
 * The {@code nixl} page store (SGLang's HiCacheNixl) on a Java model of NVIDIA NIXL. API: {@link
 * io.hicache.storage.nixl.NixlPageStore}, its provider and {@link io.hicache.storage.nixl.NixlStoreConfig}. Internal
 * (package-private): the agent the store drives ({@code NixlAgent}, registrations, descriptor lists, transfer
 * requests), the page layouts and the registration cache. The plugin SPI is in {@code spi}, the {@code POSIX} and
 * {@code OBJ} plugins in {@code posix} and {@code obj}. See docs/nixl.md for what of NIXL exists here and what does
 * not.
 */
package io.hicache.storage.nixl;
