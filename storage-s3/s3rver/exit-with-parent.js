// Preloaded into s3rver (node --require) by storage-s3's LocalS3rver: the server exits once its standard input
// closes, which happens when the test JVM that started it ends, however it ends (a JVM that is killed runs no
// shutdown hook, so without this the server would outlive it, holding its port and its folder).
'use strict';
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
