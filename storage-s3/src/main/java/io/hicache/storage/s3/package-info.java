/**
 * The S3 page store ({@link io.hicache.storage.s3.S3PageStore}, {@code s3}): one object per page in a bucket of any
 * S3-compatible service, on the AWS SDK for Java v2's asynchronous client. API: the store and its provider; the
 * configuration and the client pieces the NIXL OBJ plugin shares are in {@link io.hicache.storage.s3.client}. See
 * docs/storage.md.
 */
package io.hicache.storage.s3;
