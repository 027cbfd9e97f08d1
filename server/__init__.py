"""Live Baccarat (Punto Banco) server."""
