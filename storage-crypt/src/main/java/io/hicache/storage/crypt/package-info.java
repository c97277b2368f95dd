/**
 * The {@code encrypted} page store ({@link io.hicache.storage.crypt.EncryptedPageStore}): encryption at rest over any
 * other page store, AES-256-GCM per page with keys from a key file or an environment variable
 * ({@link io.hicache.storage.crypt.KeyRing}), rotation and per-tenant keys. See docs/security.md.
 */
package io.hicache.storage.crypt;
