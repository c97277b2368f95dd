package io.hicache.server.daemon;

import io.hicache.storage.remote.protocol.Codec;
import io.hicache.storage.remote.protocol.FrameHeader;
import io.hicache.storage.remote.protocol.Hello;
import io.hicache.storage.remote.protocol.ProtocolException;
import io.hicache.storage.remote.protocol.RequestDecoder;
import io.hicache.storage.remote.protocol.Wire;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.concurrent.TimeUnit;

/**
 * A connection's handshake (docs/protocol.md §2): its first frame must be a HELLO with the magic, a version the daemon
 * speaks and a token it accepts; anything else, or no HELLO within {@code server.handshake-timeout}, is answered ERROR
 * and the connection closes. Until then frames are held to a HELLO's size ({@link #HELLO_FRAME_BYTES}). An accepted
 * HELLO is answered, its {@link Session} handed to the connection's {@link ServerHandler}, and this handler leaves the
 * pipeline, widening the frame limit to {@code server.max-frame-bytes}; requests pipelined behind the HELLO run then.
 *
 * <p>Errors of the decoder (a frame over the limit, the partial-frame budget) pass on to the {@link ServerHandler}.
 * One instance per connection; used on its event loop only.
 */
final class HandshakeHandler extends ChannelInboundHandlerAdapter {
    /** The frame decoder's name in the pipeline. */
    static final String FRAMES = "frames";
    /** The largest frame accepted before a HELLO: a HELLO with the longest token (its declared length). */
    static final int HELLO_FRAME_BYTES =
            Wire.HEADER_BYTES + 9 + Codec.MAX_STRING_BYTES; // version 2's checksum byte included

    private final HiCacheServer server;
    private final Responder out;
    private final ServerHandler requests;
    private boolean accepted;

    HandshakeHandler(HiCacheServer server, Responder out, ServerHandler requests) {
        this.server = server;
        this.out = out;
        this.requests = requests;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        long waitMillis = server.config.handshakeTimeout().toMillis();
        ctx.executor()
                .schedule(
                        () -> {
                            if (!accepted && !out.closing() && ctx.channel().isActive()) {
                                out.failAndClose(0, Wire.E_AUTH, "no HELLO within " + waitMillis + " ms");
                            }
                        },
                        waitMillis,
                        TimeUnit.MILLISECONDS);
        ctx.fireChannelActive();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        ByteBuf frame = (ByteBuf) msg;
        FrameHeader header = out.receive(frame);
        if (header == null) {
            return;
        }
        try {
            hello(ctx, header, frame);
        } finally {
            frame.release();
        }
    }

    /** The handshake: magic, version and token; anything else first closes the connection. */
    private void hello(ChannelHandlerContext ctx, FrameHeader header, ByteBuf in) {
        long id = header.requestId();
        if (header.op() != Wire.HELLO) {
            out.failAndClose(id, Wire.E_AUTH, "the first frame must be HELLO");
            return;
        }
        Hello hello;
        try {
            hello = Hello.read(in);
        } catch (ProtocolException e) {
            out.failAndClose(id, e.code(), e.getMessage());
            return;
        }
        byte[] given = hello.token().getBytes(StandardCharsets.UTF_8);
        String adminToken = server.config.adminToken();
        Tenants tenants = server.tenants;
        boolean isAdmin =
                !adminToken.isEmpty() && MessageDigest.isEqual(given, adminToken.getBytes(StandardCharsets.UTF_8));
        String tokenTenant = isAdmin ? null : tenants.tenantOf(given);
        // A TLS client certificate whose common name is a tenant's authenticates as that tenant.
        String certTenant = Tls.peerName(ctx.channel()).filter(tenants::has).orElse(null);
        boolean sharedToken =
                MessageDigest.isEqual(given, server.config.authToken().getBytes(StandardCharsets.UTF_8));
        if (!isAdmin && tokenTenant == null && !sharedToken && !(certTenant != null && given.length == 0)) {
            out.failAndClose(
                    id,
                    Wire.E_AUTH,
                    server.config.authToken().isEmpty() && adminToken.isEmpty() && !tenants.any()
                            ? "this daemon has no auth token, and the HELLO carried one"
                            : "wrong auth token");
            return;
        }
        if (tokenTenant != null && certTenant != null && !tokenTenant.equals(certTenant)) {
            out.failAndClose(id, Wire.E_AUTH, "the token is another tenant's than the client certificate");
            return;
        }
        String tenant = tokenTenant != null ? tokenTenant : isAdmin ? null : certTenant;
        Tenants.Access access =
                isAdmin ? tenants.everything() : tenant != null ? Tenants.tenant(tenant) : tenants.shared();
        SocketAddress peer = ctx.channel().remoteAddress();
        boolean loopback = peer instanceof InetSocketAddress a
                && a.getAddress() != null
                && a.getAddress().isLoopbackAddress();
        accepted = true;
        Session session = new Session(
                hello.version(),
                hello.checksum(),
                mayAdminister(tenants, tenant != null, isAdmin, !adminToken.isEmpty(), peer),
                access,
                // The slab file holds every namespace's pages: with tenants, only the operator (admin token) maps it.
                loopback && tenant == null && (!tenants.any() || isAdmin));
        server.metrics.tenantConnection(access.label());
        ByteBuf answer = out.begin(Wire.HELLO, id);
        answer.writeShort(session.version());
        answer.writeInt(server.config.maxFrameBytes());
        answer.writeInt(server.config.maxPageBytes());
        // The slab file holds every namespace's pages: only same-host clients that are no tenant learn where it is.
        Codec.writeString(answer, session.sameHost() ? server.cache.space.file().toString() : "");
        if (session.version() >= Wire.VERSION_2) {
            answer.writeByte(session.checksum().code());
        }
        out.send(answer);
        RequestDecoder decoder = requests.accepted(session);
        ctx.pipeline().remove(this);
        // PUT bodies straight into the slab (not through TLS records, which must be decrypted first): the lander goes
        // before the decoder, told where the frames the decoder holds end.
        FrameDecoder held = (FrameDecoder) ctx.pipeline().get(FRAMES);
        PutLander lander = server.tls == null && server.config.putIntoSlab()
                ? new PutLander(
                        server.cache, server.config, server.partialFrames, decoder, session.checksum(), held.held())
                : null;
        // Frames of any allowed size from now on. The old decoder hands the bytes it holds to the new one, which may
        // run requests pipelined behind the HELLO right here: hence after the HELLO's answer.
        ctx.pipeline().replace(FRAMES, FRAMES, new FrameDecoder(server.config.maxFrameBytes(), server.partialFrames));
        if (lander != null && ctx.channel().isActive()) {
            ctx.pipeline().addBefore(FRAMES, PutLander.NAME, lander);
        }
    }

    /**
     * Whether a connection may run admin operations: with {@code server.admin-token} set, when its HELLO carried it;
     * without, when it comes from a loopback address.
     */
    static boolean mayAdminister(boolean helloCarriedAdminToken, boolean adminTokenSet, SocketAddress peer) {
        return mayAdminister(Tenants.NONE, false, helloCarriedAdminToken, adminTokenSet, peer);
    }

    /**
     * As {@link #mayAdminister(boolean, boolean, SocketAddress)}, for a daemon with {@code tenants}: a tenant never
     * may, and once tenants exist only the admin token may (a loopback peer without it no longer does: every tenant's
     * pages would be its to flush).
     */
    static boolean mayAdminister(
            Tenants tenants,
            boolean isTenant,
            boolean helloCarriedAdminToken,
            boolean adminTokenSet,
            SocketAddress peer) {
        if (isTenant) {
            return false;
        }
        if (tenants.any()) {
            return adminTokenSet && helloCarriedAdminToken;
        }
        if (adminTokenSet) {
            return helloCarriedAdminToken;
        }
        return peer instanceof InetSocketAddress a
                && a.getAddress() != null
                && a.getAddress().isLoopbackAddress();
    }
}
