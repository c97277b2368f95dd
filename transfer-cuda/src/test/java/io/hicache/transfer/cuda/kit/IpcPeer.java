package io.hicache.transfer.cuda.kit;

import io.hicache.testkit.ChildJvm;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The peer process of the cuda-ipc kit and bench ({@link IpcPeerMain}) as the parent drives it: start, address,
 * commands. Kept apart from the kit so the bench needs no JUnit. Stateless.
 */
public final class IpcPeer {
    private IpcPeer() {}

    /** Starts {@link IpcPeerMain} with a device region of {@code bytes}, on device 1 where there is one. */
    public static ChildJvm start(Path shmDir, long bytes, long seed) throws Exception {
        ChildJvm peer = ChildJvm.start(
                IpcPeerMain.class,
                List.of(shmDir.toString(), Long.toString(bytes), Long.toString(seed), Integer.toString(peerDevice())));
        if (!peer.awaitLine("ready ", 60, TimeUnit.SECONDS)) {
            List<String> lines = peer.kill();
            throw new IllegalStateException("the cuda-ipc peer did not start: " + lines);
        }
        return peer;
    }

    /** The device the peer runs on: 1 with two GPUs (GPU to GPU over NVLink or PCIe), else 0 (within one GPU). */
    public static int peerDevice() {
        int[] count = {0};
        jcuda.driver.JCudaDriver.cuDeviceGetCount(count);
        return count[0] > 1 ? 1 : 0;
    }

    /** The engine address the peer printed. */
    public static String address(ChildJvm peer) {
        return peer.lines().stream()
                .filter(l -> l.startsWith("ready "))
                .findFirst()
                .orElseThrow()
                .substring(6);
    }

    /** Asks the peer {@code command} and returns the value of the line it answers with {@code answer}. */
    public static String ask(ChildJvm peer, String command, String answer) throws Exception {
        int before = (int)
                peer.lines().stream().filter(l -> l.startsWith(answer + " ")).count();
        peer.tell(command);
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() - until < 0) {
            List<String> lines = peer.lines().stream()
                    .filter(l -> l.startsWith(answer + " "))
                    .toList();
            if (lines.size() > before) {
                return lines.get(before).substring(answer.length() + 1);
            }
            Thread.sleep(5);
        }
        throw new IllegalStateException("the peer did not answer '" + command + "'");
    }
}
