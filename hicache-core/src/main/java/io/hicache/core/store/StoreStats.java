package io.hicache.core.store;

/**
 * A snapshot of a page store's counters since it was opened, plus what it holds now. Counts are pages
 * unless the name says bytes; {@code -1} means the store cannot tell. An immutable snapshot.
 *
 * @param leadingHitQueries leading-hit queries answered
 * @param getPages          pages asked for by gets
 * @param getHits           pages delivered ({@link PageStatus#OK})
 * @param getMisses         pages not found ({@link PageStatus#MISS})
 * @param corruptPages      pages found but failing their checksum
 * @param putPages          pages offered by puts
 * @param putStored         pages written
 * @param putExisting       pages already stored, so not written again
 * @param putRejected       pages refused for lack of room
 * @param deletedPages      pages removed by deletes
 * @param failedPages       pages that failed with an I/O or server error, all operations
 * @param timedOutPages     pages not done because a deadline passed or was cancelled, all operations
 * @param backendErrors     calls the backend failed as a whole (an exception, a malformed answer); their
 *                          pages are counted as failed too, and each one is logged
 * @param bytesRead         page bytes delivered by gets
 * @param bytesWritten      page bytes written by puts
 * @param storedPages       pages held now, or -1
 * @param storedBytes       page bytes held now, or -1
 * @param capacityBytes     the most page bytes it will hold, or -1 for no limit
 */
public record StoreStats(
        long leadingHitQueries,
        long getPages,
        long getHits,
        long getMisses,
        long corruptPages,
        long putPages,
        long putStored,
        long putExisting,
        long putRejected,
        long deletedPages,
        long failedPages,
        long timedOutPages,
        long backendErrors,
        long bytesRead,
        long bytesWritten,
        long storedPages,
        long storedBytes,
        long capacityBytes) {}
