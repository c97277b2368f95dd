/**
 * Page keys: SGLang's chained SHA-256 page hashes, namespaces that keep models, dtypes and ranks apart, and the
 * store keys that combine the two.
 */
package io.hicache.core.key;
