/**
 * What the {@code s3} store and the NIXL {@code OBJ} plugin share: the {@code s3.*} settings
 * ({@link io.hicache.storage.s3.client.S3Config}), the client built from them with its bucket check
 * ({@link io.hicache.storage.s3.client.S3Clients}), and the response transformer that lands a GET's body in the
 * caller's memory ({@link io.hicache.storage.s3.client.IntoSegments}). API, exported to other modules.
 */
package io.hicache.storage.s3.client;
