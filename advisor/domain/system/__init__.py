"""System context: health and version information."""
