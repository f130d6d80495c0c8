"""Predictions: the what-if API (POST /predict) and "which GPU should I rent?" (GET /predict/hardware)."""
