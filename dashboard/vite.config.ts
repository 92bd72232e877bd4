// The dashboard's build (`npm run dashboard:build`, output in dist/, served by
// the service under /dashboard/) and dev server (`npm run dashboard:dev`:
// hot reload on :5173, with /api proxied to the running service).
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

const service = process.env["DASHBOARD_API_URL"] ?? "http://127.0.0.1:4020";

export default defineConfig({
  root: import.meta.dirname,
  base: "/dashboard/",
  plugins: [react()],
  build: { outDir: "dist", emptyOutDir: true, sourcemap: true },
  server: {
    host: "127.0.0.1",
    port: 5173,
    strictPort: true,
    // The Host header stays the dev server's, so sign-in redirects come back here.
    proxy: {
      "/api": { target: service, changeOrigin: false },
      "/auth": { target: service, changeOrigin: false },
    },
  },
});
