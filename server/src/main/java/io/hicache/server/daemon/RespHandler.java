package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.key.Namespace;
import io.hicache.core.key.PageHash;
import io.hicache.core.key.StoreKey;
import io.hicache.core.store.PageStatus;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;
import org.jspecify.annotations.Nullable;

/**
 * One Redis client's connection (docs/resp.md): runs its commands in the order they came, against the same slab, L3,
 * auth token and metrics as the binary protocol. A key is a page: its page hash is the SHA-256 of the key's bytes, in
 * the connection's namespace (model {@code resp}, the AUTH user as tenant, {@code db<n>} after a SELECT as extra
 * key). Commands that need no blocking (a GET or SET the slab answers at once) run on the event loop; the others (a
 * SET that must evict, a GET through L3, DEL, EXISTS through L3) on a worker, while the connection's later commands
 * wait, so that replies leave in order as Redis clients expect of pipelines.
 *
 * <p>Who releases what: each command's argument buffers are released once it is answered; a GET's page stays pinned
 * until the socket has taken its bytes. Confined to the connection's event loop, but for the work handed to workers.
 */
final class RespHandler extends ChannelInboundHandlerAdapter {
    private static final AtomicLong IDS = new AtomicLong();
    private static final Duration DEADLINE = Duration.ofSeconds(30);
    /** Values from this size on are checksummed and copied into the slab on a worker. */
    private static final int OFFLOADED_BYTES = 256 * 1024;
    /** Queued commands past which the connection stops reading until they are answered. */
    private static final int MAX_QUEUED = 1024;
    /** Commands of Redis's other data types: {@code -WRONGTYPE} on a key that exists, as Redis answers them. */
    private static final Set<String> OTHER_TYPES = Set.of(
            "HSET",
            "HGET",
            "HMSET",
            "HMGET",
            "HGETALL",
            "HDEL",
            "HINCRBY",
            "LPUSH",
            "RPUSH",
            "LPOP",
            "RPOP",
            "LRANGE",
            "LLEN",
            "SADD",
            "SREM",
            "SMEMBERS",
            "SCARD",
            "ZADD",
            "ZRANGE",
            "ZREM",
            "ZCARD",
            "INCR",
            "DECR",
            "INCRBY",
            "DECRBY",
            "APPEND",
            "SETRANGE",
            "GETRANGE",
            "XADD");

    private final HiCacheServer server;
    private final SlabCache cache;
    private final RespLengths lengths;
    private final long id = IDS.incrementAndGet();
    private final ArrayDeque<RespDecoder.Command> queue = new ArrayDeque<>();
    private boolean busy;
    private boolean authed;
    private boolean isAdmin;
    private boolean lastPasswordWasAdmin;
    private int protocol = 2;
    private String user = "default";
    private int db;
    private String clientName = "";
    private Namespace ns;
    private @Nullable ChannelHandlerContext ctx;

    RespHandler(HiCacheServer server, RespLengths lengths) {
        this.server = server;
        this.cache = server.cache;
        this.lengths = lengths;
        this.authed = server.config.authToken().isEmpty()
                && server.config.adminToken().isEmpty();
        this.ns = namespace();
    }

    /** The connection's namespace: docs/resp.md, "Keys". */
    private Namespace namespace() {
        return Namespace.builder("resp")
                .tenant(user.equals("default") ? "" : user)
                .extraKey(db == 0 ? "" : "db" + db)
                .build();
    }

    /** The page key of a Redis key in namespace {@code ns}: SHA-256 of the key's bytes. */
    static StoreKey keyOf(Namespace ns, ByteBuf key) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            sha.update(key.nioBuffer());
            return ns.key(PageHash.fromBytes(sha.digest(), 0));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("this JDK has no SHA-256", e);
        }
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        queue.add((RespDecoder.Command) msg);
        if (queue.size() > MAX_QUEUED) {
            ctx.channel().config().setAutoRead(false);
        }
        drain();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        Throwable c = cause instanceof io.netty.handler.codec.DecoderException
                        && cause.getCause() != null
                        && !(cause instanceof RespDecoder.ProtocolError)
                ? cause.getCause()
                : cause;
        if (c instanceof RespDecoder.ProtocolError) {
            ctx.writeAndFlush(error("ERR Protocol error: " + c.getMessage())).addListener(ChannelFutureListener.CLOSE);
        } else {
            ctx.close();
        }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        RespDecoder.Command c;
        while ((c = queue.poll()) != null) {
            c.release();
        }
        ctx.fireChannelInactive();
    }

    /** Runs queued commands in order until one must wait for a worker. */
    private void drain() {
        ChannelHandlerContext ctx = this.ctx;
        if (ctx == null) {
            return;
        }
        boolean wrote = false;
        while (!busy && !queue.isEmpty()) {
            RespDecoder.Command c = queue.poll();
            String name = c.name();
            long start = System.nanoTime();
            Object reply;
            try {
                reply = execute(c);
            } catch (RuntimeException e) {
                reply = error("ERR " + e.getMessage());
            }
            if (reply instanceof CompletableFuture<?> later) {
                busy = true;
                later.whenComplete((r, e) -> ctx.executor().execute(() -> {
                    c.release();
                    server.metrics.resp(name, System.nanoTime() - start);
                    write(ctx, e != null ? error("ERR " + e.getMessage()) : r);
                    ctx.flush();
                    busy = false;
                    drain();
                }));
            } else {
                c.release();
                server.metrics.resp(name, System.nanoTime() - start);
                write(ctx, reply);
                wrote = true;
            }
        }
        if (wrote) {
            ctx.flush();
        }
        if (queue.size() <= MAX_QUEUED / 2 && !ctx.channel().config().isAutoRead()) {
            ctx.channel().config().setAutoRead(true);
        }
    }

    /** Writes a reply: a buffer, or a GET's pinned page (unpinned once the socket has its bytes). */
    private void write(ChannelHandlerContext ctx, @Nullable Object reply) {
        if (reply instanceof PageReply page) {
            ctx.write(page.bytes).addListener(f -> cache.pages.unpin(page.page));
        } else if (reply instanceof MultiPageReply pages) {
            ctx.write(pages.bytes).addListener(f -> pages.pages.forEach(cache.pages::unpin));
        } else if (reply instanceof ByteBuf b) {
            ctx.write(b);
        } else if (reply == QUIT) {
            ctx.writeAndFlush(simple("OK")).addListener(ChannelFutureListener.CLOSE);
        }
    }

    private static final Object QUIT = new Object();

    /** A GET's answer: the bulk string (header, the page's bytes in the slab, CRLF) and the page it pins. */
    private record PageReply(ByteBuf bytes, SlabPage page) {}

    /** The reply (a buffer, a {@link PageReply}) or a future of one, for work a worker does. */
    private Object execute(RespDecoder.Command c) {
        List<ByteBuf> a = c.args();
        String name = c.name();
        if (!authed && !Set.of("AUTH", "HELLO", "QUIT", "PING").contains(name)) {
            return error("NOAUTH Authentication required.");
        }
        if (!authed && name.equals("PING")) {
            return error("NOAUTH Authentication required.");
        }
        return switch (name) {
            case "PING" -> a.size() > 1 ? bulk(a.get(1).retain()) : simple("PONG");
            case "ECHO" -> arity(a, 2, 2) ? bulk(a.get(1).retain()) : wrongArgs(name);
            case "QUIT" -> QUIT;
            case "AUTH" -> auth(a);
            case "HELLO" -> hello(a);
            case "SELECT" -> select(a);
            case "GET" -> arity(a, 2, 2) ? get(a.get(1)) : wrongArgs(name);
            case "SET" -> a.size() >= 3 ? set(a) : wrongArgs(name);
            case "MGET" -> a.size() >= 2 ? mget(a) : wrongArgs(name);
            case "MSET" -> a.size() >= 3 && a.size() % 2 == 1 ? mset(a) : wrongArgs(name);
            case "EXISTS" -> a.size() >= 2 ? exists(a) : wrongArgs(name);
            case "DEL", "UNLINK" -> a.size() >= 2 ? del(a) : wrongArgs(name);
            case "STRLEN" -> arity(a, 2, 2) ? integer(lengthOf(keyOf(ns, a.get(1)))) : wrongArgs(name);
            case "TYPE" ->
                arity(a, 2, 2) ? simple(lengthOf(keyOf(ns, a.get(1))) > 0 ? "string" : "none") : wrongArgs(name);
            case "TTL", "PTTL" ->
                arity(a, 2, 2) ? integer(lengthOf(keyOf(ns, a.get(1))) > 0 ? -1 : -2) : wrongArgs(name);
            case "EXPIRE", "PEXPIRE" ->
                arity(a, 3, 4) ? integer(lengthOf(keyOf(ns, a.get(1))) > 0 ? 1 : 0) : wrongArgs(name);
            case "DBSIZE" -> integer(pagesOf(ns).size());
            case "SCAN" -> a.size() >= 2 ? scan(a) : wrongArgs(name);
            case "INFO" -> info(a.size() > 1 ? a.get(1).toString(StandardCharsets.UTF_8) : "default");
            case "FLUSHDB" -> arity(a, 1, 2) ? flush(false) : wrongArgs(name);
            case "FLUSHALL" -> arity(a, 1, 2) ? flush(true) : wrongArgs(name);
            case "CLIENT" -> client(a);
            case "COMMAND" -> command(a);
            default ->
                OTHER_TYPES.contains(name)
                        ? (a.size() > 1 && lengthOf(keyOf(ns, a.get(1))) > 0
                                ? error("WRONGTYPE Operation against a key holding the wrong kind of value")
                                : error("ERR unsupported command '" + name + "': HiCache keeps string values only"))
                        : error("ERR unknown command '" + printable(a.getFirst()) + "', with args beginning with: "
                                + argsBeginning(a));
        };
    }

    /* ---------------------------------------------------------------- connection */

    private Object auth(List<ByteBuf> a) {
        if (a.size() != 2 && a.size() != 3) {
            return wrongArgs("AUTH");
        }
        String password = a.getLast().toString(StandardCharsets.UTF_8);
        String name = a.size() == 3 ? a.get(1).toString(StandardCharsets.UTF_8) : "default";
        String as = login(name, password);
        if (as == null) {
            return error("WRONGPASS invalid username-password pair or user is disabled.");
        }
        authenticate(as);
        return simple("OK");
    }

    /**
     * Who {@code user} with {@code password} logs in as, or null if refused. The user name is the namespace's tenant:
     * with tenants configured (docs/security.md) a tenant's token logs in as that tenant (user {@code default} or the
     * tenant's name), and the shared token only as {@code default} or as a name that is no tenant's; the admin token
     * as anyone.
     */
    private @Nullable String login(String user, String password) {
        byte[] given = password.getBytes(StandardCharsets.UTF_8);
        String tenant = server.tenants.tenantOf(given);
        if (tenant != null) {
            lastPasswordWasAdmin = false;
            return user.equals("default") || user.equals(tenant) ? tenant : null;
        }
        if (!tokenMatches(password)) {
            return null;
        }
        return !lastPasswordWasAdmin && server.tenants.has(user) ? null : user;
    }

    private boolean tokenMatches(String password) {
        byte[] given = password.getBytes(StandardCharsets.UTF_8);
        String token = server.config.authToken();
        String admin = server.config.adminToken();
        lastPasswordWasAdmin = !admin.isEmpty() && MessageDigest.isEqual(given, admin.getBytes(StandardCharsets.UTF_8));
        return lastPasswordWasAdmin || MessageDigest.isEqual(given, token.getBytes(StandardCharsets.UTF_8));
    }

    private void authenticate(String name) {
        authed = true;
        isAdmin = !server.config.adminToken().isEmpty() && lastPasswordWasAdmin;
        user = name;
        ns = namespace();
    }

    private Object hello(List<ByteBuf> a) {
        int version = protocol;
        int i = 1;
        if (a.size() > 1) {
            try {
                version = Integer.parseInt(a.get(1).toString(StandardCharsets.UTF_8));
            } catch (NumberFormatException e) {
                return error("ERR Protocol version is not an integer or out of range");
            }
            if (version != 2 && version != 3) {
                return error("NOPROTO unsupported protocol version");
            }
            i = 2;
        }
        String name = null;
        for (; i < a.size(); i++) {
            String opt = a.get(i).toString(StandardCharsets.UTF_8).toUpperCase(Locale.ROOT);
            if (opt.equals("AUTH") && i + 2 < a.size()) {
                String u = login(
                        a.get(i + 1).toString(StandardCharsets.UTF_8),
                        a.get(i + 2).toString(StandardCharsets.UTF_8));
                if (u == null) {
                    return error("WRONGPASS invalid username-password pair or user is disabled.");
                }
                authenticate(u);
                i += 2;
            } else if (opt.equals("SETNAME") && i + 1 < a.size()) {
                name = a.get(i + 1).toString(StandardCharsets.UTF_8);
                i++;
            } else {
                return error("ERR Syntax error in HELLO option '" + opt + "'");
            }
        }
        if (!authed) {
            return error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
                    + "<proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP "
                    + "protocol version at the same time");
        }
        protocol = version;
        if (name != null) {
            clientName = name;
        }
        List<Object> fields = List.of(
                "server",
                "redis",
                "version",
                "7.2.0",
                "proto",
                (long) protocol,
                "id",
                id,
                "mode",
                "standalone",
                "role",
                "master",
                "modules",
                List.of());
        return map(fields);
    }

    private Object select(List<ByteBuf> a) {
        if (!arity(a, 2, 2)) {
            return wrongArgs("SELECT");
        }
        try {
            int n = Integer.parseInt(a.get(1).toString(StandardCharsets.UTF_8));
            if (n < 0 || n > 15) {
                return error("ERR DB index is out of range");
            }
            db = n;
            ns = namespace();
            return simple("OK");
        } catch (NumberFormatException e) {
            return error("ERR value is not an integer or out of range");
        }
    }

    private Object client(List<ByteBuf> a) {
        String sub = a.size() > 1 ? a.get(1).toString(StandardCharsets.UTF_8).toUpperCase(Locale.ROOT) : "";
        return switch (sub) {
            case "SETNAME" -> {
                if (a.size() != 3) {
                    yield wrongArgs("CLIENT|SETNAME");
                }
                clientName = a.get(2).toString(StandardCharsets.UTF_8);
                yield simple("OK");
            }
            case "GETNAME" -> clientName.isEmpty() ? nil() : bulk(clientName);
            case "ID" -> integer(id);
            case "SETINFO" -> simple("OK"); // library name and version (redis-py, Lettuce): noted nowhere
            case "INFO" ->
                bulk("id=" + id + " name=" + clientName + " db=" + db + " user=" + user + " resp=" + protocol + "\n");
            default -> error("ERR unknown subcommand '" + sub + "'. Try CLIENT HELP.");
        };
    }

    private Object command(List<ByteBuf> a) {
        String sub = a.size() > 1 ? a.get(1).toString(StandardCharsets.UTF_8).toUpperCase(Locale.ROOT) : "";
        return switch (sub) {
            case "COUNT" -> integer(0);
            case "DOCS" -> map(List.of());
            default -> array(List.of()); // clients that probe the table get none, and do without it
        };
    }

    /* ---------------------------------------------------------------- strings */

    /** A key's page length: in the slab, else as a RESP SET stored it (L3 may hold it); 0 when unknown. */
    private int lengthOf(StoreKey key) {
        SlabPage p = cache.pages.pin(key);
        if (p != null) {
            int n = p.length;
            cache.pages.unpin(p);
            return n;
        }
        return cache.l3.attached() ? lengths.get(key) : 0;
    }

    private Object get(ByteBuf keyBytes) {
        StoreKey key = keyOf(ns, keyBytes);
        SlabPage p = cache.pages.pin(key);
        if (p != null) {
            cache.counters.hostHits.increment();
            return pageReply(p);
        }
        int length = cache.l3.attached() ? lengths.get(key) : 0;
        if (length == 0) {
            cache.counters.misses.increment();
            return nil();
        }
        return CompletableFuture.supplyAsync(
                () -> {
                    ReadThrough.Pinned got =
                            cache.reads.pinAll(List.of(key), new int[] {length}, Deadline.after(DEADLINE));
                    SlabPage page = got.pages()[0]; // hits and misses counted by the read-through
                    if (page == null) {
                        return nil();
                    }
                    return pageReply(page);
                },
                server.workers);
    }

    private PageReply pageReply(SlabPage p) {
        ByteBuf head = ctx().alloc()
                .buffer(16)
                .writeByte('$')
                .writeBytes(Long.toString(p.length).getBytes(StandardCharsets.US_ASCII))
                .writeByte('\r')
                .writeByte('\n');
        CompositeByteBuf b = ctx().alloc().compositeDirectBuffer(3);
        b.addComponent(true, head);
        b.addComponent(true, cache.space.body(p));
        b.addComponent(true, ctx().alloc().buffer(2).writeByte('\r').writeByte('\n'));
        return new PageReply(b, p);
    }

    private Object mget(List<ByteBuf> a) {
        List<StoreKey> keys = new ArrayList<>();
        for (int i = 1; i < a.size(); i++) {
            keys.add(keyOf(ns, a.get(i)));
        }
        // Every key here: answered on the event loop; else every key through L3 on a worker.
        List<SlabPage> here = new ArrayList<>();
        for (StoreKey k : keys) {
            SlabPage p = cache.pages.pin(k);
            if (p == null) {
                here.forEach(cache.pages::unpin);
                return CompletableFuture.supplyAsync(() -> mgetThrough(keys), server.workers);
            }
            here.add(p);
        }
        cache.counters.hostHits.add(here.size());
        return multiPage(here.toArray(SlabPage[]::new));
    }

    private Object mgetThrough(List<StoreKey> keys) {
        SlabPage[] pages = new SlabPage[keys.size()];
        for (int i = 0; i < keys.size(); i++) {
            SlabPage p = cache.pages.pin(keys.get(i));
            if (p != null) {
                cache.counters.hostHits.increment();
            } else if (cache.l3.attached() && lengths.get(keys.get(i)) > 0) { // the read-through counts what it finds
                p = cache.reads.pinAll(
                                List.of(keys.get(i)), new int[] {lengths.get(keys.get(i))}, Deadline.after(DEADLINE))
                        .pages()[0];
            } else {
                cache.counters.misses.increment();
            }
            pages[i] = p;
        }
        return multiPage(pages);
    }

    /** An array of pages (null: nil), one composite whose pages stay pinned until sent. */
    private Object multiPage(@Nullable SlabPage[] pages) {
        CompositeByteBuf b = ctx().alloc().compositeDirectBuffer(pages.length * 3 + 1);
        b.addComponent(true, ascii("*" + pages.length + "\r\n"));
        List<SlabPage> pinned = new ArrayList<>();
        for (SlabPage p : pages) {
            if (p == null) {
                b.addComponent(true, nil());
            } else {
                b.addComponent(true, ascii("$" + p.length + "\r\n"));
                b.addComponent(true, cache.space.body(p));
                b.addComponent(true, ascii("\r\n"));
                pinned.add(p);
            }
        }
        return new MultiPageReply(b, pinned);
    }

    private Object set(List<ByteBuf> a) {
        boolean nx = false;
        boolean xx = false;
        for (int i = 3; i < a.size(); i++) {
            String opt = a.get(i).toString(StandardCharsets.UTF_8).toUpperCase(Locale.ROOT);
            switch (opt) {
                case "NX" -> nx = true;
                case "XX" -> xx = true;
                case "KEEPTTL" -> {}
                case "EX", "PX", "EXAT", "PXAT" -> {
                    // Retention hints: accepted and checked, not enforced (pages live until evicted; docs/resp.md).
                    if (++i >= a.size()) {
                        return error("ERR syntax error");
                    }
                    try {
                        if (Long.parseLong(a.get(i).toString(StandardCharsets.UTF_8)) <= 0) {
                            return error("ERR invalid expire time in 'set' command");
                        }
                    } catch (NumberFormatException e) {
                        return error("ERR value is not an integer or out of range");
                    }
                }
                default -> {
                    return error("ERR syntax error");
                }
            }
        }
        if (nx && xx) {
            return error("ERR syntax error");
        }
        return store(keyOf(ns, a.get(1)), a.get(2), nx, xx);
    }

    private Object mset(List<ByteBuf> a) {
        List<Object> results = new ArrayList<>();
        boolean later = false;
        for (int i = 1; i < a.size(); i += 2) {
            Object r = store(keyOf(ns, a.get(i)), a.get(i + 1), false, false);
            later |= r instanceof CompletableFuture<?>;
            results.add(r);
        }
        if (!later) {
            for (Object r : results) {
                if (r instanceof ByteBuf b && b.getByte(0) == '-') {
                    results.stream().filter(o -> o != b && o instanceof ByteBuf).forEach(o -> ((ByteBuf) o).release());
                    return b;
                }
                ((ByteBuf) r).release();
            }
            return simple("OK");
        }
        return CompletableFuture.allOf(results.stream()
                        .filter(r -> r instanceof CompletableFuture<?>)
                        .toArray(CompletableFuture[]::new))
                .thenApply(v -> {
                    ByteBuf firstError = null;
                    for (Object r : results) {
                        ByteBuf b = (ByteBuf) (r instanceof CompletableFuture<?> f ? f.join() : r);
                        if (firstError == null && b.getByte(0) == '-') {
                            firstError = b;
                        } else {
                            b.release();
                        }
                    }
                    return firstError != null ? firstError : simple("OK");
                });
    }

    /**
     * Stores a value as the page of {@code key}: replacing a stored one unless {@code nx} (then nil when there is one),
     * only replacing with {@code xx} (nil when there is none). The reply, or a future of it when room must be made
     * or a page removed first (a worker).
     */
    private Object store(StoreKey key, ByteBuf value, boolean nx, boolean xx) {
        int length = value.readableBytes();
        if (length == 0) {
            return error("ERR HiCache does not store empty values (a page has at least 1 byte)");
        }
        if (length > server.config.maxPageBytes()) {
            return error("ERR value of " + length + " bytes is over server.max-page-bytes ("
                    + server.config.maxPageBytes() + ")");
        }
        boolean exists = cache.pages.contains(key);
        if (xx && !exists && !cache.l3.attached()) {
            return nil();
        }
        // A small value is stored here; a large one's checksum and copy go to a worker, so that this event loop goes
        // on reading other connections meanwhile (this connection's later commands wait: replies stay in order).
        if (!exists && !xx && length < OFFLOADED_BYTES) {
            SlabWrites.PutOutcome o = cache.writes.put(key, value, length, crc32c(value), EvictionChoice.NONE);
            if (!(o instanceof SlabWrites.Deferred)) {
                return stored(key, length, o, nx);
            }
        }
        value.retain(); // the worker's; released there
        return CompletableFuture.supplyAsync(
                () -> {
                    try {
                        return storeOnWorker(key, value, nx, xx);
                    } finally {
                        value.release();
                    }
                },
                server.workers);
    }

    private ByteBuf storeOnWorker(StoreKey key, ByteBuf value, boolean nx, boolean xx) {
        Deadline deadline = Deadline.after(DEADLINE);
        boolean there = cache.pages.contains(key)
                || (cache.l3.attached() && lengths.get(key) > 0 && cache.reads.leadingHits(List.of(key), deadline) > 0);
        if ((nx && there) || (xx && !there)) {
            return nil();
        }
        if (there) {
            cache.removals.delete(List.of(key), deadline); // SET replaces; the binary protocol's PUT would not
        }
        SlabWrites.PutOutcome o =
                cache.writes.put(key, value, value.readableBytes(), crc32c(value), EvictionChoice.until(deadline));
        return stored(key, value.readableBytes(), o, nx);
    }

    private ByteBuf stored(StoreKey key, int length, SlabWrites.PutOutcome o, boolean nx) {
        return switch (o) {
            case SlabWrites.Stored s -> {
                if (s.pinned() != null) {
                    cache.pages.unpin(s.pinned());
                }
                if (s.status() == PageStatus.OK) {
                    lengths.put(key, length);
                    yield simple("OK");
                }
                yield nx ? nil() : simple("OK"); // EXISTS: stored meanwhile by another client
            }
            case SlabWrites.Refused r ->
                r.why() == PageStatus.EXISTS
                        ? (nx ? nil() : simple("OK"))
                        : error(
                                "OOM no room for the value in the host slab (pages pinned, not yet written to L3, or the "
                                        + "namespace over server.namespace-quota): " + r.why());
            case SlabWrites.Deferred d -> error("ERR no room without eviction");
        };
    }

    private static int crc32c(ByteBuf value) {
        CRC32C crc = new CRC32C();
        for (ByteBuffer b : value.nioBuffers()) {
            crc.update(b);
        }
        return (int) crc.getValue();
    }

    private Object exists(List<ByteBuf> a) {
        List<StoreKey> keys = new ArrayList<>();
        long here = 0;
        for (int i = 1; i < a.size(); i++) {
            StoreKey k = keyOf(ns, a.get(i));
            if (cache.pages.contains(k)) {
                here++;
            } else {
                keys.add(k);
            }
        }
        if (keys.isEmpty() || !cache.l3.attached()) {
            return integer(here);
        }
        long found = here;
        return CompletableFuture.supplyAsync(
                () -> {
                    long n = found;
                    for (StoreKey k : keys) {
                        n += cache.reads.leadingHits(List.of(k), Deadline.after(DEADLINE)) > 0 ? 1 : 0;
                    }
                    return integer(n);
                },
                server.workers);
    }

    private Object del(List<ByteBuf> a) {
        List<StoreKey> keys = new ArrayList<>();
        for (int i = 1; i < a.size(); i++) {
            keys.add(keyOf(ns, a.get(i)));
        }
        return CompletableFuture.supplyAsync(
                () -> {
                    PageStatus[] st = cache.removals.delete(keys, Deadline.after(DEADLINE));
                    long n = 0;
                    for (int i = 0; i < st.length; i++) {
                        lengths.remove(keys.get(i));
                        n += st[i] == PageStatus.OK ? 1 : 0;
                    }
                    return integer(n);
                },
                server.workers);
    }

    /* ---------------------------------------------------------------- keyspace */

    /**
     * FLUSHDB (the connection's namespace) or FLUSHALL (every namespace, an admin operation as the binary protocol's
     * CLEAR_ALL: with the admin token, or from loopback when none is set), from the slab and L3; answered when L3's
     * part is done, or an error at the deadline saying what was done.
     */
    private Object flush(boolean all) {
        if (all
                && !HandshakeHandler.mayAdminister(
                        server.tenants,
                        server.tenants.has(user) && !isAdmin,
                        isAdmin,
                        !server.config.adminToken().isEmpty(),
                        ctx().channel().remoteAddress())) {
            return error("NOPERM FLUSHALL is an admin operation: AUTH with server.admin-token");
        }
        Namespace namespace = ns;
        return CompletableFuture.supplyAsync(
                () -> {
                    Removals.Clearing c = all ? cache.removals.clearAll() : cache.removals.clear(namespace);
                    if (all) {
                        lengths.clear();
                    }
                    if (c.inL3() != null) {
                        try {
                            c.inL3().get(DEADLINE.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
                        } catch (Exception e) {
                            return error("ERR the slab's pages are removed (" + c.removedHere() + "); L3's clear did "
                                    + "not finish (" + c.describeL3() + "): " + e);
                        }
                    }
                    return simple("OK");
                },
                server.workers);
    }

    private List<SlabPage> pagesOf(Namespace namespace) {
        List<SlabPage> out = new ArrayList<>();
        for (SlabPage p : cache.pages.snapshot()) {
            if (p.key.namespace().equals(namespace)) {
                out.add(p);
            }
        }
        return out;
    }

    /** SCAN over the slab's pages of the namespace, by page hash (the daemon keeps hashes, not key names). */
    private Object scan(List<ByteBuf> a) {
        long cursor;
        try {
            cursor = Long.parseLong(a.get(1).toString(StandardCharsets.UTF_8));
        } catch (RuntimeException e) {
            return error("ERR invalid cursor");
        }
        int count = 10;
        for (int i = 2; i + 1 < a.size(); i += 2) {
            String opt = a.get(i).toString(StandardCharsets.UTF_8).toUpperCase(Locale.ROOT);
            if (opt.equals("COUNT")) {
                try {
                    count = Math.clamp(Long.parseLong(a.get(i + 1).toString(StandardCharsets.UTF_8)), 1, 1000);
                } catch (NumberFormatException e) {
                    return error("ERR value is not an integer or out of range");
                }
            }
        }
        List<String> hashes = pagesOf(ns).stream()
                .map(p -> p.key.hash().toHex())
                .sorted(Comparator.naturalOrder())
                .toList();
        int from = (int) Math.min(Math.max(cursor, 0), hashes.size());
        int to = Math.min(hashes.size(), from + count);
        List<Object> page = new ArrayList<>(hashes.subList(from, to));
        return array(List.of(to >= hashes.size() ? "0" : Integer.toString(to), page));
    }

    private Object info(String section) {
        String s = section.toLowerCase(Locale.ROOT);
        boolean all = s.equals("all") || s.equals("default") || s.equals("everything");
        StringBuilder b = new StringBuilder();
        if (all || s.equals("server")) {
            b.append("# Server\r\nredis_version:7.2.0\r\nredis_mode:standalone\r\nhicache:1\r\ntcp_port:")
                    .append(server.respPort())
                    .append("\r\n\r\n");
        }
        if (all || s.equals("clients")) {
            b.append("# Clients\r\nconnected_clients:")
                    .append(server.metrics.connections())
                    .append("\r\n\r\n");
        }
        if (all || s.equals("memory")) {
            long total = cache.space.slabBytes();
            b.append("# Memory\r\nused_memory:")
                    .append(total - cache.space.freeBytes())
                    .append("\r\nmaxmemory:")
                    .append(total)
                    .append("\r\nmaxmemory_policy:allkeys-lru\r\n\r\n");
        }
        if (all || s.equals("stats")) {
            b.append("# Stats\r\nkeyspace_hits:")
                    .append(cache.counters.hostHits.sum() + cache.counters.storeHits.sum())
                    .append("\r\nkeyspace_misses:")
                    .append(cache.counters.misses.sum())
                    .append("\r\nevicted_keys:")
                    .append(cache.counters.evictedPages.sum())
                    .append("\r\n\r\n");
        }
        if (all || s.equals("keyspace")) {
            b.append("# Keyspace\r\ndb")
                    .append(db)
                    .append(":keys=")
                    .append(pagesOf(ns).size())
                    .append(",expires=0\r\n");
        }
        return bulk(b.toString());
    }

    /* ---------------------------------------------------------------- replies */

    /** An MGET's answer, whose pages stay pinned until sent. */
    private record MultiPageReply(ByteBuf bytes, List<SlabPage> pages) {}

    private ChannelHandlerContext ctx() {
        return java.util.Objects.requireNonNull(ctx, "the handler's context (set when added)");
    }

    private ByteBuf ascii(String s) {
        return ctx().alloc().buffer(s.length()).writeBytes(s.getBytes(StandardCharsets.US_ASCII));
    }

    private ByteBuf simple(String s) {
        return ascii("+" + s + "\r\n");
    }

    private ByteBuf error(String s) {
        return ascii("-" + s.replace('\r', ' ').replace('\n', ' ') + "\r\n");
    }

    private ByteBuf integer(long n) {
        return ascii(":" + n + "\r\n");
    }

    private ByteBuf nil() {
        return ascii(protocol == 3 ? "_\r\n" : "$-1\r\n");
    }

    private ByteBuf bulk(String s) {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        ByteBuf out = ctx().alloc().buffer(b.length + 16);
        out.writeBytes(("$" + b.length + "\r\n").getBytes(StandardCharsets.US_ASCII))
                .writeBytes(b)
                .writeByte('\r')
                .writeByte('\n');
        return out;
    }

    /** A bulk string of {@code body}, which this takes (its caller retained it). */
    private ByteBuf bulk(ByteBuf body) {
        CompositeByteBuf b = ctx().alloc().compositeBuffer(3);
        b.addComponent(true, ascii("$" + body.readableBytes() + "\r\n"));
        b.addComponent(true, body);
        b.addComponent(true, ascii("\r\n"));
        return b;
    }

    /** An array of strings, longs and lists of them (bulk strings, integers, nested arrays). */
    private ByteBuf array(List<?> items) {
        CompositeByteBuf b = ctx().alloc().compositeBuffer(items.size() + 1);
        b.addComponent(true, ascii("*" + items.size() + "\r\n"));
        items.forEach(i -> b.addComponent(true, value(i)));
        return b;
    }

    /** A map of alternating keys and values: RESP3's {@code %}, an array of the pairs in RESP2. */
    private ByteBuf map(List<?> pairs) {
        if (protocol == 2) {
            return array(pairs);
        }
        CompositeByteBuf b = ctx().alloc().compositeBuffer(pairs.size() + 1);
        b.addComponent(true, ascii("%" + pairs.size() / 2 + "\r\n"));
        pairs.forEach(i -> b.addComponent(true, value(i)));
        return b;
    }

    private ByteBuf value(Object i) {
        return switch (i) {
            case String s -> bulk(s);
            case Long n -> integer(n);
            case List<?> l -> array(l);
            default -> throw new IllegalArgumentException("no RESP form for " + i);
        };
    }

    private ByteBuf wrongArgs(String name) {
        return error("ERR wrong number of arguments for '" + name.toLowerCase(Locale.ROOT) + "' command");
    }

    private static boolean arity(List<ByteBuf> a, int min, int max) {
        return a.size() >= min && a.size() <= max;
    }

    private static String printable(ByteBuf b) {
        String s = b.toString(StandardCharsets.UTF_8);
        return s.length() > 64 ? s.substring(0, 64) + "..." : s;
    }

    private static String argsBeginning(List<ByteBuf> a) {
        StringBuilder b = new StringBuilder();
        for (int i = 1; i < Math.min(a.size(), 4); i++) {
            b.append('\'').append(printable(a.get(i))).append("' ");
        }
        return b.toString().strip();
    }
}
