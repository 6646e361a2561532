from django.db import models


class Author(models.Model):
    name = models.CharField(max_length=100, unique=True)


class Book(models.Model):
    title = models.CharField(max_length=300)
    author = models.ForeignKey(Author, on_delete=models.CASCADE, related_name="books")
    published = models.DateField(null=True)
    price = models.DecimalField(max_digits=8, decimal_places=2, null=True)
    pages = models.IntegerField(default=0)
    tags = models.JSONField(default=list)
