/** The {@code OBJ} NIXL plugin: objects of an S3-compatible service, through {@code storage-s3}'s client. */
package io.hicache.storage.nixl.obj;
