// A small Java 17 HTTP service for docs/third-party.md, on the JDK's own
// com.sun.net.httpserver: each request builds a JSON order summary (on-CPU work in
// OrdersHandler.handle) and every 20th appends to an audit log and forces it to disk
// (FileChannel.force: a synchronous wait inside the handler).
//   java -XX:+PreserveFramePointer bench/third_party/OrdersServer.java PORT LOGFILE
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

public class OrdersServer {
    static final class OrdersHandler implements HttpHandler {
        private final FileChannel log;
        private final AtomicLong served = new AtomicLong();

        OrdersHandler(FileChannel log) { this.log = log; }

        static String summarize(int n) {
            StringBuilder sb = new StringBuilder("{\"items\":[");
            long total = 0;
            for (int i = 0; i < n; i++) {
                int qty = i % 5 + 1;
                total += qty * 3L;
                sb.append(i == 0 ? "" : ",").append("{\"sku\":\"sku-").append(i * 7919 % 1000)
                  .append("\",\"qty\":").append(qty).append('}');
            }
            return sb.append("],\"total\":").append(total).append('}').toString();
        }

        void auditFlush(String line) throws IOException {
            synchronized (log) {
                log.write(ByteBuffer.wrap(line.getBytes(StandardCharsets.UTF_8)));
                log.force(false);
            }
        }

        @Override
        public void handle(HttpExchange ex) throws IOException {
            byte[] body = summarize(200).getBytes(StandardCharsets.UTF_8);
            if (served.incrementAndGet() % 20 == 0)
                auditFlush(System.nanoTime() + " " + ex.getRequestURI() + " " + body.length + "\n");
            ex.getResponseHeaders().set("Content-Type", "application/json");
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream os = ex.getResponseBody()) {
                os.write(body);
            }
        }
    }

    public static void main(String[] args) throws IOException {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 18600;
        Path logPath = Path.of(args.length > 1 ? args[1] : "/var/tmp/orders_server_audit.log");
        FileChannel log = FileChannel.open(logPath, StandardOpenOption.CREATE,
                                           StandardOpenOption.WRITE, StandardOpenOption.APPEND);
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 128);
        server.createContext("/", new OrdersHandler(log));
        server.setExecutor(Executors.newFixedThreadPool(4));
        server.start();
        System.out.println("OrdersServer: pid " + ProcessHandle.current().pid() + " port " + port);
    }
}
