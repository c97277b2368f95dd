/**
 * The {@code file} page store ({@link io.hicache.storage.file.FilePageStore}: one file per page, bounded by a capacity,
 * a checksum with every page, its folder owned while open), and the two pieces other local stores share with it:
 * {@link io.hicache.storage.file.StoreRoot} (an owned, marked, locked root folder) and
 * {@link io.hicache.storage.file.PageId} (a page's identity as a path or a database key). See docs/storage.md.
 */
package io.hicache.storage.file;
