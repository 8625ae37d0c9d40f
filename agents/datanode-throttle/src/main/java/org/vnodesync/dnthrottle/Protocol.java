package org.vnodesync.dnthrottle;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/** One connection of the control channel: requests in, replies out, one at a time (DATANODE_CHANNEL.md). */
final class Protocol {
    static final String VERSION = "0.1.0";
    static final int MAX_LINE = 4096;
    static final int MAX_APPLY_LINES = 200_000;
    private static final String TOO_LONG = "\u0000too long";

    private final Throttles throttles;

    Protocol(Throttles throttles) {
        this.throttles = throttles;
    }

    void serve(InputStream in, OutputStream out) throws IOException {
        String line;
        while ((line = readLine(in)) != null) {
            String reply = handle(line, in);
            if (reply == null) {
                return;  // peer went away inside an APPLY: nothing applied
            }
            out.write(reply.getBytes(StandardCharsets.UTF_8));
            out.flush();
        }
    }

    /** The full reply (ending in an OK or ERR line) to one request; null if the input ended mid-request. */
    String handle(String line, InputStream in) throws IOException {
        if (line.equals("PING")) {
            return "OK vnode-sync-datanode-throttle " + VERSION + " started=" + throttles.startedMs() + "\n";
        }
        if (line.equals("STATS")) {
            synchronized (throttles) {
                return throttles.stats() + "OK " + throttles.policy().generation() + "\n";
            }
        }
        if (line.startsWith("APPLY ") || line.equals("APPLY")) {
            return apply(line, in);
        }
        return "ERR unknown request '" + ApplyParser.printable(line) + "'\n";
    }

    private String apply(String header, InputStream in) throws IOException {
        // Read up to END whatever happens, so a bad line never desynchronises the conversation.
        String error = null;
        long generation = 0;
        String[] f = header.split(" ", -1);
        if (f.length != 2) {
            error = "usage: APPLY <generation>";
        } else {
            try {
                generation = ApplyParser.generation(f[1]);
            } catch (ApplyParser.BadApply e) {
                error = e.getMessage();
            }
        }
        List<String> body = new ArrayList<>();
        String line;
        while (true) {
            line = readLine(in);
            if (line == null) {
                return null;
            }
            if (line.equals("END")) {
                break;
            }
            if (error != null) {
                continue;
            }
            if (line.equals(TOO_LONG)) {
                error = "line " + (body.size() + 1) + " longer than " + MAX_LINE + " bytes";
            } else if (body.size() >= MAX_APPLY_LINES) {
                error = "more than " + MAX_APPLY_LINES + " lines";
            } else {
                body.add(line);
            }
        }
        if (error != null) {
            return "ERR " + error + "; nothing changed\n";
        }
        try {
            Policy next = ApplyParser.parse(generation, body, throttles.startDefaults());
            throttles.apply(next);
            AgentLog.info("rates applied: generation " + generation + ", " + next.users().size() + " users, "
                    + next.uids().size() + " uids, " + next.connections().size() + " connections");
            return "OK " + generation + "\n";
        } catch (ApplyParser.BadApply e) {
            return "ERR " + e.getMessage() + "; nothing changed\n";
        }
    }

    /** A "\n"-terminated UTF-8 line without the terminator; TOO_LONG past MAX_LINE bytes; null at EOF. */
    static String readLine(InputStream in) throws IOException {
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        boolean tooLong = false;
        int b;
        while ((b = in.read()) != -1) {
            if (b == '\n') {
                return tooLong ? TOO_LONG : buffer.toString(StandardCharsets.UTF_8);
            }
            if (buffer.size() < MAX_LINE) {
                buffer.write(b);
            } else {
                tooLong = true;
            }
        }
        return null;
    }
}
