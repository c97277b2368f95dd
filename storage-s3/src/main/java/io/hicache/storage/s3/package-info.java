/**
 * Will hold the S3 page store on the AWS SDK for Java v2 (issue: storage-s3). Nothing is implemented here yet: the module exists so the build, its dependencies
 * and their convergence are in place before that issue lands. See docs/architecture.md.
 */
package io.hicache.storage.s3;
