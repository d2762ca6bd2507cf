"""The Streamlit demo: renders any agent's typed event stream (VRAG now, the memory-graph agent later)."""
