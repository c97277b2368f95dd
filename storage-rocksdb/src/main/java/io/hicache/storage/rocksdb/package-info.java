/**
 * The {@code rocksdb} page store ({@link io.hicache.storage.rocksdb.RocksDbPageStore}): pages in a RocksDB database
 * (blob files, no compression), bounded by a capacity, a checksum with every page, its folder owned while open. A module
 * of its own because RocksDB's jar is 92 MB: whoever does not use this store does not carry it. See docs/storage.md.
 */
package io.hicache.storage.rocksdb;
