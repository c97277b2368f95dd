package io.hicache.server.daemon;

import io.hicache.core.Deadline;
import io.hicache.core.store.PageStatus;
import io.hicache.storage.remote.protocol.WireChecksum;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;

/**
 * A request being answered: where its answers go, its op and id (which the answer repeats), its deadline (from when
 * its frame was read), and its connection's page checksum. What a request handler needs besides the decoded request.
 * Immutable; answered from the event loop or a worker.
 *
 * @param out      the connection's answers
 * @param op       the request's operation code
 * @param id       the request's id
 * @param deadline the request's deadline
 * @param checksum the page checksum of the connection (its HELLO's)
 */
record Call(Responder out, int op, long id, Deadline deadline, WireChecksum checksum) {
    /** The connection: owner of the request's leases and reservations. */
    Channel channel() {
        return out.channel();
    }

    /** The answer's buffer, its header written; {@link #send} it. */
    ByteBuf begin() {
        return out.begin(op, id);
    }

    ChannelFuture send(ByteBuf answer) {
        return out.send(answer);
    }

    /** An answer of one status per page. */
    void statuses(PageStatus[] statuses) {
        out.statuses(op, id, statuses);
    }

    /** An ERROR answer to this request; the connection stays. */
    void fail(short code, String message) {
        out.fail(id, code, message, false);
    }
}
