"""flow.core"""
