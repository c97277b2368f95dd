/**
 * Local page stores: {@link io.hicache.storage.file.FilePageStore} ({@code file}, one file per page) and
 * {@link io.hicache.storage.file.RocksDbPageStore} ({@code rocksdb}, pages in a RocksDB database). Both are bounded
 * by a capacity, keep a checksum with every page, and own their folder while open. See docs/storage.md.
 */
package io.hicache.storage.file;
