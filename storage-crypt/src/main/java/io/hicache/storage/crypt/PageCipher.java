package io.hicache.storage.crypt;

import io.hicache.core.key.StoreKey;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import java.util.Optional;
import javax.crypto.AEADBadTagException;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;

/**
 * Seals and opens pages with AES-256-GCM ({@link SealedPageDescriptor} has the layout), from and into off-heap memory:
 * {@code Cipher.doFinal(ByteBuffer, ByteBuffer)} over direct buffers that view the segments, so no page is copied to
 * the Java heap whole. (The JDK's GCM still moves direct buffers through two 512-byte arrays of its own as it goes;
 * benchmarks.md, {@code crypt}, measures what that costs against its array path.)
 *
 * <p>Stateless; each thread keeps one {@link Cipher} (a cipher is not thread-safe), so it is meant for a pool of a few
 * long-lived threads, such as the encrypted store's.
 */
final class PageCipher {
    private static final String TRANSFORMATION = "AES/GCM/NoPadding";
    private static final ThreadLocal<Cipher> CIPHER = ThreadLocal.withInitial(PageCipher::newCipher);

    /** What opening a sealed page found. */
    enum Opened {
        /** Authenticated and decrypted into the target. */
        OK,
        /** Not a sealed page of this version (damaged header, or not written by this store). Target untouched. */
        MALFORMED,
        /** Sealed under a key id the ring does not hold. Target untouched. */
        UNKNOWN_KEY,
        /** Sealed under another key than the ring's key of that id (its key check differs). Target untouched. */
        WRONG_KEY,
        /** The tag did not match: damaged bytes, or bytes of another page. The JDK zeroes the target. */
        AUTHENTICATION_FAILED
    }

    /**
     * What opening a page found, and the key id its header names.
     *
     * @param outcome what was found
     * @param keyId   the header's key id; empty for a malformed header
     */
    record Result(Opened outcome, Optional<String> keyId) {}

    private PageCipher() {}

    private static Cipher newCipher() {
        try {
            return Cipher.getInstance(TRANSFORMATION);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("this JDK has no " + TRANSFORMATION, e);
        }
    }

    /**
     * Seals {@code page}, stored under {@code storeKey}, into {@code sealed}: header, ciphertext and tag, under
     * {@code key} with a fresh nonce from {@code random}. {@code sealed} is exactly
     * {@link SealedPageDescriptor#sealedBytes} long.
     *
     * @throws GeneralSecurityException if the JDK's cipher refuses (it should not)
     */
    static void seal(PageKey key, StoreKey storeKey, MemorySegment page, MemorySegment sealed, SecureRandom random)
            throws GeneralSecurityException {
        byte[] nonce = new byte[SealedPageDescriptor.NONCE_BYTES];
        random.nextBytes(nonce);
        byte[] header = SealedPageDescriptor.header(key, nonce);
        MemorySegment.copy(header, 0, sealed, ValueLayout.JAVA_BYTE, 0, header.length);
        Cipher cipher = CIPHER.get();
        cipher.init(Cipher.ENCRYPT_MODE, key.key(), new GCMParameterSpec(SealedPageDescriptor.TAG_BITS, nonce));
        cipher.updateAAD(SealedPageDescriptor.aad(header, storeKey));
        ByteBuffer out = sealed.asSlice(SealedPageDescriptor.HEADER_BYTES).asByteBuffer();
        int written = cipher.doFinal(page.asByteBuffer(), out);
        if (written != page.byteSize() + SealedPageDescriptor.TAG_BYTES) {
            throw new GeneralSecurityException("AES-GCM wrote " + written + " bytes for a page of " + page.byteSize());
        }
    }

    /**
     * Opens {@code sealed}, read under {@code storeKey}, into {@code target} ({@link SealedPageDescriptor#OVERHEAD_BYTES}
     * shorter). Only {@link Opened#OK} leaves page bytes in the target.
     *
     * @throws GeneralSecurityException if the JDK's cipher refuses for another reason than a wrong tag
     */
    static Result open(KeyRing keys, StoreKey storeKey, MemorySegment sealed, MemorySegment target)
            throws GeneralSecurityException {
        byte[] header = new byte[SealedPageDescriptor.HEADER_BYTES];
        MemorySegment.copy(sealed, ValueLayout.JAVA_BYTE, 0, header, 0, header.length);
        Optional<String> keyId = SealedPageDescriptor.keyId(header);
        if (keyId.isEmpty()) {
            return new Result(Opened.MALFORMED, keyId);
        }
        Optional<PageKey> key = keys.find(keyId.get());
        if (key.isEmpty()) {
            return new Result(Opened.UNKNOWN_KEY, keyId);
        }
        if (!SealedPageDescriptor.checkMatches(header, key.get())) {
            return new Result(Opened.WRONG_KEY, keyId);
        }
        byte[] nonce = new byte[SealedPageDescriptor.NONCE_BYTES];
        System.arraycopy(header, SealedPageDescriptor.NONCE_OFFSET, nonce, 0, nonce.length);
        Cipher cipher = CIPHER.get();
        cipher.init(Cipher.DECRYPT_MODE, key.get().key(), new GCMParameterSpec(SealedPageDescriptor.TAG_BITS, nonce));
        cipher.updateAAD(SealedPageDescriptor.aad(header, storeKey));
        try {
            int written = cipher.doFinal(
                    sealed.asSlice(SealedPageDescriptor.HEADER_BYTES).asByteBuffer(), target.asByteBuffer());
            if (written != target.byteSize()) {
                throw new GeneralSecurityException(
                        "AES-GCM opened " + written + " bytes into a target of " + target.byteSize());
            }
        } catch (AEADBadTagException e) {
            return new Result(Opened.AUTHENTICATION_FAILED, keyId);
        }
        return new Result(Opened.OK, keyId);
    }
}
